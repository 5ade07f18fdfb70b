"""``make demo``'s web server (uvicorn serving ``quartermaster.asgi``, as ``run_demo``
starts it): the portal's pages and every static file they link load, as they did under
``runserver``; ``/sessions/`` belongs to the proxy; no WebSocket is served elsewhere."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import Client
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from quartermaster.management.commands.run_demo import web_server_command
from tests.e2e.conftest import child_env, free_port
from tests.scheduler.tick.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

_STATIC = re.compile(r"""(?:href|src)="(/static/[^"]+)\"""")


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_demos_pages_and_their_static_files_load_under_uvicorn(world: Any, spawn: Any) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    spawn(web_server_command(f"127.0.0.1:{port}"), child_env())
    wait_for(lambda: answers(url + "/login/"), timeout=60, what="the demo's web server")
    client = Client()
    client.force_login(world.alice)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}

    for path, logged_in in (("/login/", False), ("/", True), ("/jobs/", True)):
        page = httpx.get(url + path, cookies=cookies if logged_in else None, timeout=30)
        assert page.status_code == 200, path
        linked = _STATIC.findall(page.text)
        assert linked, f"{path} links no static file"
        for static in linked:
            assert httpx.get(url + static, timeout=30).status_code == 200, static

    to_login = httpx.get(url + "/sessions/1/", timeout=30)
    assert (to_login.status_code, to_login.headers["location"]) == (302, "/login/?next=%2Fsessions%2F1%2F")
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{port}/api/v1/jobs/", open_timeout=30)


@pytest.mark.parametrize(
    ("addrport", "host", "port"),
    [
        ("127.0.0.1:8000", "127.0.0.1", "8000"),
        ("0.0.0.0:80", "0.0.0.0", "80"),
        ("[::1]:8001", "::1", "8001"),
        ("9000", "127.0.0.1", "9000"),
    ],
)
def test_the_demo_listens_where_runserver_would(addrport: str, host: str, port: str) -> None:
    command = web_server_command(addrport)

    assert command[command.index("--host") + 1] == host and command[command.index("--port") + 1] == port


@pytest.mark.parametrize("addrport", ["localhost", "1.2.3.4:", ":80", "host:99999", "a:b:80"])
def test_a_bad_address_is_a_clear_command_error(addrport: str) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="addrport must be"):
        web_server_command(addrport)
