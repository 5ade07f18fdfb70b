"""The proxy to interactive sessions, end to end: a browser's requests (httpx, websockets)
to the real portal under uvicorn, forwarded to a real app server.

Personas: alice owns the session; bob (another user), admin (staff) and anonymous must
not get through.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin, Subprotocol

from scheduler.models import InteractiveSession
from tests.builders import interactive_session, make_interactive_app
from tests.web.sessions.servers import CHUNK, wait_for
from web.sessions.access import DECISION_SECONDS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def jupyter(world: Any, app_server: Any) -> Any:
    """alice's running JupyterLab session (an app that checks the secret header)."""
    return interactive_session(world.alice, world.lab, make_interactive_app(), port=app_server.port)


def get(portal: Any, path: str, cookie: str = "", **headers: str) -> httpx.Response:
    if cookie:
        headers["Cookie"] = cookie
    return httpx.get(portal.url + path, headers=headers, timeout=30)


def ws_url(portal: Any, session: Any, path: str = "ws") -> str:
    return f"ws://127.0.0.1:{portal.port}/sessions/{session.pk}/{path}"


# --- Who gets through -------------------------------------------------------------------


def test_the_owner_reaches_her_sessions_server(portal: Any, jupyter: Any, world: Any, cookie_of: Any) -> None:
    response = get(portal, f"/sessions/{jupyter.pk}/echo?x=1", cookie_of(world.alice))

    assert response.status_code == 200
    assert response.json() == {"method": "GET", "path": f"/sessions/{jupyter.pk}/echo?x=1", "body": ""}


@pytest.mark.parametrize("persona", ["bob", "admin"])
def test_anyone_else_logged_in_is_forbidden_staff_included(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any, persona: str
) -> None:
    response = get(portal, f"/sessions/{jupyter.pk}/echo", cookie_of(getattr(world, persona)))

    assert response.status_code == 403
    assert "Not your session" in response.text
    assert app_server.requests == []


def test_anonymous_is_sent_to_the_login_page_and_back(portal: Any, jupyter: Any, app_server: Any) -> None:
    response = get(portal, f"/sessions/{jupyter.pk}/lab?reset=1", cookie="sessionid=forged")

    assert response.status_code == 302
    assert response.headers["location"] == f"/login/?next=%2Fsessions%2F{jupyter.pk}%2Flab%3Freset%3D1"
    assert app_server.requests == []


def test_an_inactive_user_is_no_longer_logged_in(portal: Any, jupyter: Any, world: Any, cookie_of: Any) -> None:
    cookie = cookie_of(world.alice)
    world.alice.is_active = False
    world.alice.save()

    assert get(portal, f"/sessions/{jupyter.pk}/echo", cookie).status_code == 302


@pytest.mark.parametrize(
    ("state", "port", "status", "words"),
    [
        ("PENDING", None, 503, "starting"),
        ("RUNNING", None, 503, "starting"),
        ("CANCELLED", 20000, 410, "ended"),
        ("TIMEOUT", 20000, 410, "ended"),
    ],
    ids=["queued", "server-not-ready", "deleted", "walltime"],
)
def test_a_session_not_running_gets_a_short_clear_page(
    portal: Any, world: Any, cookie_of: Any, state: str, port: int | None, status: int, words: str
) -> None:
    session = interactive_session(world.alice, world.lab, make_interactive_app(), port=port, state=state)

    response = get(portal, f"/sessions/{session.pk}/", cookie_of(world.alice))

    assert response.status_code == status
    assert words in response.text


def test_a_database_outage_is_a_503_to_retry_not_an_error(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    from web.sessions import access

    cookie = cookie_of(world.alice)

    def unreachable(session_key: str, job_id: int) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(access, "decide", unreachable)
    response = get(portal, f"/sessions/{jupyter.pk}/echo", cookie)

    assert (response.status_code, response.headers["retry-after"]) == (503, "5")
    assert "Unavailable for a moment" in response.text


def test_an_unknown_session_is_not_found(portal: Any, world: Any, cookie_of: Any) -> None:
    assert get(portal, "/sessions/987654/", cookie_of(world.alice)).status_code == 404
    assert get(portal, "/sessions/lab/", cookie_of(world.alice)).status_code == 404


def test_the_session_root_without_its_slash_is_redirected(portal: Any, jupyter: Any) -> None:
    response = get(portal, f"/sessions/{jupyter.pk}?a=b")

    assert (response.status_code, response.headers["location"]) == (302, f"/sessions/{jupyter.pk}/?a=b")


def test_a_port_outside_session_ports_is_refused(
    portal: Any, world: Any, cookie_of: Any, app_server: Any, settings: Any
) -> None:
    session = interactive_session(world.alice, world.lab, make_interactive_app(), port=app_server.port)
    settings.SESSION_PORTS = (app_server.port + 1, app_server.port + 10)

    response = get(portal, f"/sessions/{session.pk}/echo", cookie_of(world.alice))

    assert response.status_code == 502
    assert app_server.requests == []


def test_a_host_that_could_rewrite_the_url_is_refused(portal: Any, world: Any, cookie_of: Any, app_server: Any) -> None:
    session = interactive_session(
        world.alice, world.lab, make_interactive_app(), host="127.0.0.1:5432/x@", port=app_server.port
    )

    assert get(portal, f"/sessions/{session.pk}/echo", cookie_of(world.alice)).status_code == 502


def test_a_server_that_went_away_is_a_bad_gateway(portal: Any, world: Any, cookie_of: Any, settings: Any) -> None:
    from tests.web.sessions.servers import free_socket

    sock = free_socket()  # bound, never listening: connections are refused
    port = sock.getsockname()[1]
    settings.SESSION_PORTS = (port, port)
    session = interactive_session(world.alice, world.lab, make_interactive_app(), port=port)

    response = get(portal, f"/sessions/{session.pk}/", cookie_of(world.alice))
    sock.close()

    assert response.status_code == 502
    assert "does not answer" in response.text


# --- What crosses -----------------------------------------------------------------------


def test_the_secret_is_added_and_the_portals_credentials_never_reach_the_app(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any
) -> None:
    cookie = f"{cookie_of(world.alice)}; csrftoken=portal-csrf; theme=dark"

    get(portal, f"/sessions/{jupyter.pk}/echo", cookie, Authorization="Token portal-api-token")

    seen = app_server.requests[0]["headers"]
    assert seen.getall("Authorization") == [f"token {jupyter.secret}"]
    assert seen["Cookie"] == "theme=dark"
    assert seen["Host"] == f"127.0.0.1:{portal.port}"


def test_an_app_without_a_secret_gets_no_authorization_at_all(
    portal: Any, world: Any, cookie_of: Any, app_server: Any
) -> None:
    tensorboard = make_interactive_app("tensorboard", secret_via="none")
    session = interactive_session(world.alice, world.lab, tensorboard, port=app_server.port)

    get(portal, f"/sessions/{session.pk}/echo", cookie_of(world.alice), Authorization="Token portal-api-token")

    assert "Authorization" not in app_server.requests[0]["headers"]
    assert "Cookie" not in app_server.requests[0]["headers"]


def test_the_app_cannot_set_the_portals_cookies_nor_cookies_outside_its_path(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any
) -> None:
    response = get(portal, f"/sessions/{jupyter.pk}/cookies", cookie_of(world.alice))

    prefix = f"/sessions/{jupyter.pk}/"
    assert response.headers.get_list("set-cookie") == [
        f"everywhere=1; Path={prefix}",
        f"nopath=1; Path={prefix}",
        f"scoped=1; Path={prefix}lab",
        f"domain=1; Path={prefix}",
        f"sneaky=1; Path={prefix}",
    ]
    assert "service-worker-allowed" not in response.headers


def test_a_redirect_to_the_servers_own_address_stays_on_the_portal(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any
) -> None:
    response = get(portal, f"/sessions/{jupyter.pk}/redirect", cookie_of(world.alice))

    assert (response.status_code, response.headers["location"]) == (302, f"/sessions/{jupyter.pk}/lab")


def test_a_large_upload_streams_through_without_being_held(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any
) -> None:
    """The rest of the body is sent only once the app has begun reading it: a proxy that
    read the whole body first would never let the upload finish."""
    chunks = 64

    def body() -> Iterator[bytes]:
        yield b"y" * CHUNK
        wait_for(lambda: app_server.received > 0, what="the app to receive the first MiB before the rest is sent")
        for _ in range(chunks - 1):
            yield b"y" * CHUNK

    response = httpx.post(
        f"{portal.url}/sessions/{jupyter.pk}/upload",
        content=body(),
        headers={"Cookie": cookie_of(world.alice)},
        timeout=60,
    )

    assert response.json() == {"bytes": chunks * CHUNK, "sha256": hashlib.sha256(b"y" * CHUNK * chunks).hexdigest()}


def test_a_large_download_streams_through_without_being_held(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any
) -> None:
    """The app sends its first MiB and holds the rest until the browser has that MiB."""
    chunks, first = 64, b""
    url = f"{portal.url}/sessions/{jupyter.pk}/download?chunks={chunks}"
    with httpx.stream("GET", url, headers={"Cookie": cookie_of(world.alice)}, timeout=90) as response:
        received = 0
        for piece in response.iter_raw():
            if not app_server.release.is_set():
                first += piece
                if len(first) >= CHUNK:
                    app_server.release.set()
            received += len(piece)

    assert not app_server.held_out  # the first MiB reached the browser while the app held the rest
    assert received == chunks * CHUNK


# --- WebSocket ------------------------------------------------------------------------


def test_a_websocket_echoes_through_the_proxy(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any
) -> None:
    origin = f"http://127.0.0.1:{portal.port}"
    cookie = f"{cookie_of(world.alice)}; csrftoken=portal-csrf"
    with connect(
        ws_url(portal, jupyter),
        origin=Origin(origin),
        additional_headers={"Cookie": cookie},
        subprotocols=[Subprotocol("v1.kernel.websocket.jupyter.org")],
        open_timeout=30,
    ) as ws:
        ws.send("print(1)")
        assert ws.recv(timeout=30) == "print(1)"
        ws.send(b"\x00\x01binary")
        assert ws.recv(timeout=30) == b"\x00\x01binary"
        assert ws.subprotocol == "v1.kernel.websocket.jupyter.org"

    seen = app_server.requests[0]["headers"]
    assert seen["Authorization"] == f"token {jupyter.secret}"
    assert "Cookie" not in seen
    assert seen["Origin"] == origin


def test_the_servers_close_reaches_the_browser_with_its_code(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any
) -> None:
    with connect(
        ws_url(portal, jupyter, "ws-once"), additional_headers={"Cookie": cookie_of(world.alice)}, open_timeout=30
    ) as ws:
        ws.send("alice")
        assert ws.recv(timeout=30) == "bye alice"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)

    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001


@pytest.mark.parametrize(
    ("persona", "origin"),
    [("alice", "http://evil.example"), ("alice", "null"), ("bob", None), ("admin", None), ("anonymous", None)],
    ids=["cross-site", "opaque-origin", "another-user", "staff", "anonymous"],
)
def test_a_websocket_is_refused_cross_site_or_to_anyone_but_the_owner(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any, persona: str, origin: str | None
) -> None:
    cookie = "" if persona == "anonymous" else cookie_of(getattr(world, persona))
    with pytest.raises(InvalidStatus) as refused:
        connect(
            ws_url(portal, jupyter),
            origin=Origin(origin or f"http://127.0.0.1:{portal.port}"),
            additional_headers={"Cookie": cookie} if cookie else None,
            open_timeout=30,
        )

    assert refused.value.response.status_code == 403
    assert app_server.requests == []


# --- Within the cache's bound -----------------------------------------------------------


def test_a_logout_takes_effect_once_the_cached_pass_expires(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, clock: Any
) -> None:
    from django.contrib.sessions.models import Session

    cookie = cookie_of(world.alice)
    path = f"/sessions/{jupyter.pk}/echo"
    assert get(portal, path, cookie).status_code == 200
    Session.objects.all().delete()  # what logging out does to her session

    assert get(portal, path, cookie).status_code == 200  # the pass is cached...
    clock.advance(DECISION_SECONDS)
    assert get(portal, path, cookie).status_code == 302  # ...DECISION_SECONDS at most


def test_an_ended_session_is_gone_once_the_cached_pass_expires(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, clock: Any
) -> None:
    cookie = cookie_of(world.alice)
    path = f"/sessions/{jupyter.pk}/echo"
    assert get(portal, path, cookie).status_code == 200
    type(jupyter.job).objects.filter(pk=jupyter.pk).update(state="CANCELLED")

    clock.advance(DECISION_SECONDS)
    assert get(portal, path, cookie).status_code == 410


def test_an_open_websocket_is_closed_after_a_logout(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, clock: Any
) -> None:
    from django.contrib.sessions.models import Session

    with connect(ws_url(portal, jupyter), additional_headers={"Cookie": cookie_of(world.alice)}, open_timeout=30) as ws:
        ws.send("hello")
        assert ws.recv(timeout=30) == "hello"
        Session.objects.all().delete()
        clock.advance(DECISION_SECONDS)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=DECISION_SECONDS + 30)

    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


# --- Activity ---------------------------------------------------------------------------


def test_requests_mark_the_session_active_at_most_once_a_minute(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any
) -> None:
    cookie = cookie_of(world.alice)
    get(portal, f"/sessions/{jupyter.pk}/echo", cookie)
    first = InteractiveSession.objects.get(pk=jupyter.pk).last_activity_at
    get(portal, f"/sessions/{jupyter.pk}/echo", cookie)

    assert first is not None
    assert InteractiveSession.objects.get(pk=jupyter.pk).last_activity_at == first


def test_a_host_name_the_portal_does_not_answer_to_is_a_bad_request(
    portal: Any, jupyter: Any, world: Any, cookie_of: Any, app_server: Any
) -> None:
    cookie = cookie_of(world.alice)

    assert get(portal, f"/sessions/{jupyter.pk}/echo", cookie, Host="rebound.evil.example").status_code == 400
    with pytest.raises(InvalidStatus):
        connect(
            ws_url(portal, jupyter),
            origin=Origin("http://rebound.evil.example"),
            additional_headers={"Cookie": cookie, "Host": "rebound.evil.example"},
            open_timeout=30,
        )
    assert app_server.requests == []
