"""While the database or the broker is unreachable, the portal answers 503 with
``Retry-After`` (JSON under ``/api/``, a short page elsewhere) instead of a 500 that looks
like a bug; a database error that is a real defect stays a 500.

The outage is made where it happens: the database driver itself fails to give a cursor
(and, on PostgreSQL, the server really ends the connection or refuses a new one), and
the broker client really fails to connect to a port where nothing listens.
"""

from __future__ import annotations

import socket
from typing import Any, cast
from unittest import mock

import psycopg
import pytest
import redis
from django.db import InterfaceError, OperationalError, connection
from django.test import Client

from common.outages import RETRY_AFTER_SECONDS, outage
from people.api.views import MeView
from people.services import create_api_token


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "exc,what",
    [
        pytest.param(OperationalError("connection refused"), "database", id="refused"),
        pytest.param(OperationalError("server closed the connection unexpectedly"), "database", id="server-closed"),
        pytest.param(
            OperationalError("terminating connection due to administrator command"), "database", id="admin-shutdown"
        ),
        pytest.param(InterfaceError("connection already closed"), "database", id="closed-interface"),
        pytest.param(redis.ConnectionError("Error 111 connecting"), "message broker", id="redis-down"),
        pytest.param(OperationalError("no such table: scheduler_job"), None, id="defect-missing-table"),
        pytest.param(OperationalError("database is locked"), None, id="sqlite-lock-is-not-an-outage"),
        pytest.param(InterfaceError("cursor already closed"), None, id="defect-cursor-misuse"),
        pytest.param(ValueError("connection refused"), None, id="not-a-driver-error"),
    ],
)
def test_what_counts_as_an_outage(exc, what):
    found = outage(exc)
    assert (found.what if found else None) == what


def test_kombus_connection_error_is_a_broker_outage():
    from kombu.exceptions import OperationalError as KombuOperationalError

    found = outage(KombuOperationalError("[Errno 111] Connection refused"))
    assert found is not None and found.what == "message broker"


def driver_raises(message: str) -> Any:
    """Within it the driver cannot give a cursor and says ``message`` (as psycopg does
    when PostgreSQL refuses connections); Django wraps its error as it would a real one."""
    return mock.patch.object(
        connection, "create_cursor", side_effect=cast(Any, connection).Database.OperationalError(message)
    )


def _assert_api_503(response: Any) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["Content-Type"] == "application/json"
    assert "database is unavailable for a moment" in response.json()["detail"]


def test_a_token_call_during_a_database_outage_is_503_json_with_retry_after(world):
    _, secret = create_api_token(world.alice, "script")
    with driver_raises("connection refused"):
        _assert_api_503(Client().get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Bearer {secret}"))


def test_a_signed_in_call_during_a_database_outage_is_503_json(world, client_for):
    client = client_for(world.alice)
    with driver_raises("server closed the connection unexpectedly"):
        _assert_api_503(client.get("/api/v1/me/"))


def test_a_page_during_a_database_outage_is_a_short_503_page(world):
    client = Client()
    client.force_login(world.alice)
    with driver_raises("connection refused"):
        response = client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["Content-Type"].startswith("text/html")
    assert b"Try again in a moment" in response.content


def test_a_database_defect_stays_a_500(world, client_for):
    client = client_for(world.alice)
    client.raise_request_exception = False
    with driver_raises("no such table: scheduler_job"):
        assert client.get("/api/v1/me/").status_code == 500
        assert client.get("/").status_code == 500


def test_a_broker_outage_when_a_view_enqueues_is_503(world, client_for, monkeypatch):
    """The view talks to a broker where nothing listens: the client library's real error."""

    def enqueue(self: Any, request: Any) -> Any:
        redis.Redis(port=_closed_port(), socket_connect_timeout=2).ping()

    monkeypatch.setattr(MeView, "get", enqueue)
    response = client_for(world.alice).get("/api/v1/me/")
    assert response.status_code == 503 and response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert "message broker is unavailable" in response.json()["detail"]


# --- A real PostgreSQL outage (the machine's server keeps running) ------------------------


def _second_connection() -> psycopg.Connection[Any]:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.connect(**params, autocommit=True)


@pytest.mark.postgres
def test_postgres_ending_the_portals_connection_is_503_not_500(transactional_db, world, client_for):
    """The administrator's ``pg_terminate_backend`` (what a restart does to every
    connection): the next request's first query fails; the one after reconnects."""
    client = client_for(world.alice)
    assert client.get("/api/v1/me/").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _second_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    _assert_api_503(client.get("/api/v1/me/"))
    connection.close_if_unusable_or_obsolete()  # what request_finished does outside tests
    assert client.get("/api/v1/me/").status_code == 200


@pytest.mark.postgres
def test_postgres_refusing_connections_is_503_not_500(transactional_db, world, client_for):
    """A server that is not listening (restarting): psycopg's own "connection refused"."""
    client = client_for(world.alice)
    connection.close()
    port = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = str(_closed_port())
    try:
        _assert_api_503(client.get("/api/v1/me/"))
        page = client.get("/")
        assert page.status_code == 503 and b"Try again in a moment" in page.content
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
    assert client.get("/api/v1/me/").status_code == 200
