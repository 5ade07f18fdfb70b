"""Real peers for the notifier: an SMTP server process (aiosmtpd, storing each message in
a maildir) and an HTTP receiver that records each webhook POST and answers as told."""

from __future__ import annotations

import http.server
import mailbox
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An HTTP server on a free port, in a thread: records every POST and its headers."""
    state = Receiver(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.received.append((dict(self.headers), body))
            self.send_response(state.answers.pop(0) if state.answers else 200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_port}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
