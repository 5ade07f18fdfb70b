"""Fixtures of the proxy's tests: a session's real app server, the real portal under
uvicorn (its proxy's decision cache on a clock the test moves), and login cookies."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.web.sessions.servers import AppServer, Background, Portal, start_app_server


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def app_server(settings: Any) -> Iterator[AppServer]:
    """A session's server on a free port, which ``SESSION_PORTS`` is narrowed to."""
    background, server = Background(), AppServer()
    runner = start_app_server(server, background)
    settings.SESSION_PORTS = (server.port, server.port)
    yield server
    server.release.set()
    background.run(runner.cleanup())
    background.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def portal(transactional_db: None, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Portal]:
    """The portal under uvicorn, with a fresh proxy whose cached decisions age on ``clock``."""
    import quartermaster.asgi
    from web.sessions.access import DecisionCache
    from web.sessions.proxy import SessionProxy

    monkeypatch.setattr(quartermaster.asgi, "session_proxy", SessionProxy(decisions=DecisionCache(clock=clock)))
    server = Portal()
    yield server
    server.stop()


@pytest.fixture
def cookie_of() -> Callable[[Any], str]:
    """``cookie_of(user)`` -> a ``Cookie`` header value of a fresh portal login of ``user``."""
    from django.conf import settings
    from django.test import Client

    def login(user: Any) -> str:
        client = Client()
        client.force_login(user)
        return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    return login
