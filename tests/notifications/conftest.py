"""Real peers for the notifier: an SMTP server process (aiosmtpd, storing each message in
a maildir) and an HTTP receiver that records each webhook POST and answers as told; and
a resolver whose answers a test chooses."""

from __future__ import annotations

import http.server
import mailbox
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _missing


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Smtp:
    port: int
    maildir: Path

    def messages(self) -> list[Any]:
        return list(mailbox.Maildir(self.maildir))


@pytest.fixture
def smtp(tmp_path: Path, settings: Any) -> Iterator[Smtp]:
    """aiosmtpd in its own process on a free port; Django's mail goes to it."""
    try:
        import aiosmtpd  # noqa: F401
    except ImportError:
        _missing("aiosmtpd is not installed (pip install -r requirements-dev.txt)")
    port, maildir = free_port(), tmp_path / "maildir"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aiosmtpd",
            "-n",
            "-l",
            f"127.0.0.1:{port}",
            "-c",
            "aiosmtpd.handlers.Mailbox",
            str(maildir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"the SMTP server did not start: {process.stderr.read()!r}" if process.stderr else "no server"
                )
            time.sleep(0.05)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    try:
        yield Smtp(port, maildir)
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


@dataclass
class Receiver:
    url: str
    #: Status codes to answer with, in order; then 200.
    answers: list[int] = field(default_factory=list)
    #: Headers sent with every answer (a ``Location`` for a redirect, say).
    headers: dict[str, str] = field(default_factory=dict)
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@contextmanager
def serving(host: str, port: int = 0) -> Iterator[Receiver]:
    """An HTTP server on ``host`` (on ``port``, or a free one), in a thread: records every
    POST and its headers, and answers as its ``Receiver`` says."""
    state = Receiver(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.received.append((dict(self.headers), body))
            self.send_response(state.answers.pop(0) if state.answers else 200)
            for name, value in state.headers.items():
                self.send_header(name, value)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    state.url = f"http://{host}:{server.server_port}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, which the site allows (``NOTIFY_WEBHOOK_ALLOWED_HOSTS``):
    webhooks never go to loopback otherwise."""
    settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1/32"]
    with serving("127.0.0.1") as state:
        yield state


@pytest.fixture
def internal_receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.2 (loopback too; Linux answers on all of 127/8) that no
    allow-list names: what an attacker would like the portal to reach."""
    with serving("127.0.0.2") as state:
        yield state


@dataclass
class Dns:
    """Answers for chosen host names; every other name goes to the real resolver."""

    #: name -> the addresses of each lookup in turn; the last answer stays.
    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)

    def serve(self, name: str, *addresses: str, then: list[str] | None = None) -> None:
        self.answers[name] = [list(addresses)] + ([then] if then is not None else [])

    def lookup(self, name: str, port: Any) -> list[tuple[Any, ...]]:
        self.lookups.append(name)
        turns = self.answers[name]
        addresses = turns.pop(0) if len(turns) > 1 else turns[0]
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port or 0, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port or 0))
            for a in addresses
        ]


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    """``dns.serve("hooks.example.org", "93.184.216.34", then=["127.0.0.1"])``: a
    resolver whose answer may change after the first lookup (DNS rebinding)."""
    fake, real = Dns(), socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name in fake.answers:
            return fake.lookup(name, port)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return fake
