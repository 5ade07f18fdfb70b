"""The production web process, exactly as the Dockerfile and docker-compose.yml start it
(gunicorn with uvicorn workers serving ``quartermaster.asgi``), serves the portal's pages
and the interactive sessions' proxy, HTTP and WebSocket, on one port."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect
from websockets.typing import Origin

from tests.builders import interactive_session, make_interactive_app
from tests.e2e.conftest import child_env, free_port
from tests.scheduler.tick.waiting import wait_for
from tests.web.sessions.servers import AppServer, Background, start_app_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def dockerfile_command() -> list[str]:
    cmd = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD "))
    return list(json.loads(cmd.removeprefix("CMD ")))


def compose_web_command() -> list[str]:
    line = re.search(r"migrate --noinput && (gunicorn [^\"]+)\"", (ROOT / "docker-compose.yml").read_text())
    assert line, "docker-compose.yml's web service starts gunicorn after migrating"
    return shlex.split(line.group(1))


def test_the_compose_file_and_the_image_start_the_same_web_process() -> None:
    assert compose_web_command() == dockerfile_command()
    assert "quartermaster.asgi:application" in dockerfile_command()


def test_the_production_web_process_serves_pages_and_the_sessions_proxy(world: Any, spawn: Any) -> None:
    background, app_server = Background(), AppServer()
    runner = start_app_server(app_server, background)
    try:
        session = interactive_session(world.alice, world.lab, make_interactive_app(), port=app_server.port)
        port = free_port()
        command = dockerfile_command()
        command[command.index("--bind") + 1] = f"127.0.0.1:{port}"
        command[command.index("--workers") + 1] = "2"
        ports = f"{app_server.port}-{app_server.port}"
        spawn([sys.executable, "-m", *command], child_env(SESSION_PORTS=ports))
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(url + "/login/"), timeout=90, what="gunicorn's uvicorn workers")
        client = Client()
        client.force_login(world.alice)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

        echoed = httpx.get(f"{url}/sessions/{session.pk}/echo?q=1", headers={"Cookie": cookie}, timeout=30)
        assert echoed.json()["path"] == f"/sessions/{session.pk}/echo?q=1"
        with connect(
            f"ws://127.0.0.1:{port}/sessions/{session.pk}/ws",
            origin=Origin(url),
            additional_headers={"Cookie": cookie},
            open_timeout=30,
        ) as ws:
            ws.send("through gunicorn")
            assert ws.recv(timeout=30) == "through gunicorn"
    finally:
        background.run(runner.cleanup())
        background.stop()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
