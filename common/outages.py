"""Outages of what the portal stands on (PostgreSQL, the Celery broker) answer 503 with
``Retry-After``, not a 500 that looks like a bug.

While PostgreSQL restarts, or Redis is down, every request that needs it fails with a
connection error. That is not a defect of the request nor of the portal: the caller
should wait a moment and ask again, and ``qm`` and scripts do so when told (503 with
``Retry-After``). Under ``/api/`` the answer is the API's JSON error (``{"detail": ...}``),
elsewhere a short page. Every other error, a database error that is a real defect
("no such table", a constraint) included, stays a 500.

Two places use :func:`outage`: ``common.api.errors.exception_handler`` for DRF views,
and :class:`OutageMiddleware` for the pages and for what DRF lets through.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import InterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

log = logging.getLogger(__name__)

#: How long callers are asked to wait (seconds): a PostgreSQL restart or a failover
#: takes seconds, and clients that honour it (qm) retry a few times within a minute.
RETRY_AFTER_SECONDS = 5

#: PostgreSQL error codes of a server that is unreachable, restarting or full: class 08
#: (connection exception), admin/crash shutdown, "cannot connect now" (starting up or in
#: recovery) and "too many connections".
_UNREACHABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300")
#: What drivers say when the server is not there (psycopg gives no code for a refused or
#: lost connection; SQLite never says these).
_UNREACHABLE_WORDS = (
    "connection refused",
    "could not connect",
    "server closed the connection",
    "terminating connection due to administrator command",
    "connection already closed",
    "the connection is closed",
    "the connection is lost",
    "consuming input failed",
    "could not receive data",
    "could not send data",
    "connection timed out",
    "timeout expired",
    "no route to host",
    "could not translate host name",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "ssl syscall error",
    "too many clients already",
)


@dataclass(frozen=True)
class Outage:
    """A service the portal needs is unreachable: ``what`` names it for people."""

    what: str

    @property
    def detail(self) -> str:
        return f"The portal's {self.what} is unavailable for a moment; try again in {RETRY_AFTER_SECONDS} seconds."


def _database_unreachable(exc: BaseException) -> bool:
    sqlstate = getattr(exc.__cause__, "sqlstate", None) or ""
    if sqlstate.startswith(_UNREACHABLE_SQLSTATES):
        return True
    text = f"{exc} {exc.__cause__ or ''}".lower()
    return any(words in text for words in _UNREACHABLE_WORDS)


def _broker_errors() -> tuple[type[BaseException], ...]:
    """Connection errors of the broker clients (imported here: the web process may run
    without a broker configured, yet the libraries are installed with Celery)."""
    from kombu.exceptions import OperationalError as KombuOperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (KombuOperationalError, RedisConnectionError, RedisTimeoutError)


def outage(exc: BaseException) -> Outage | None:
    """The outage ``exc`` reports, or ``None`` when it is anything else (a defect)."""
    if isinstance(exc, (DatabaseOperationalError, InterfaceError)) and _database_unreachable(exc):
        return Outage("database")
    if isinstance(exc, _broker_errors()):
        return Outage("message broker")
    return None


def unavailable_response(request: HttpRequest, found: Outage) -> HttpResponse:
    """503 with ``Retry-After``: the API's JSON error under ``/api/``, a short page elsewhere.

    The page is rendered without the request, so no context processor reads the session
    or the user from the database that is not there."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": found.detail}, status=503)
    else:
        context = {
            "title": "Unavailable for a moment",
            "explanation": f"The portal cannot reach its {found.what} right now (a restart, most likely).",
            "what_to_do": f"Try again in a moment: reload this page in {RETRY_AFTER_SECONDS} seconds.",
        }
        response = HttpResponse(render_to_string("error.html", context), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class OutageMiddleware:
    """Turns an outage raised by a view (or by rendering its answer) into a 503; any
    other exception goes on to Django's 500 handling."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        found = outage(exception)
        if found is None:
            return None
        log.warning("%s %s: %s unavailable: %s", request.method, request.path, found.what, exception)
        return unavailable_response(request, found)
