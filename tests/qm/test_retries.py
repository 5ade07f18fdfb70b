"""``qm`` rides out a portal that restarts: a call that is safe to send twice is sent
again on 502/503/504 or a refused connection, waiting what ``Retry-After`` asks, a
bounded number of times within a bounded time, and says so on stderr; a submission is
not sent twice.

Against a real HTTP server on a local port (a thread) that answers as told; the client's
waits are recorded instead of slept.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from qm.api import Api, ApiError, Retry, retry_after
from qm.cli import main

JOB = {"id": 42, "name": "train", "state": "PENDING"}
#: An answer of the portal: its status and headers.
Answer = tuple[int, dict[str, str]]
UNAVAILABLE = {"detail": "The portal's database is unavailable for a moment; try again in 2 seconds."}


@dataclass
class Portal:
    """Answers each request with the next of ``script``: ``(status, headers)``; the last
    one repeats. 2xx answers carry ``JOB``."""

    script: list[Answer]
    seen: list[str] = field(default_factory=list)

    def answer(self) -> Answer:
        return self.script[min(len(self.seen) - 1, len(self.script) - 1)]


def _handler(portal: Portal) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _respond(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            portal.seen.append(f"{self.command} {self.path}")
            status, headers = portal.answer()
            body = json.dumps(JOB if status < 300 else UNAVAILABLE).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _respond

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def serve(portal: Portal, port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(portal))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def start() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def run(script: list[Answer], port: int = 0) -> tuple[Portal, str]:
        portal = Portal(script)
        servers.append(serve(portal, port))
        return portal, f"http://127.0.0.1:{servers[-1].server_address[1]}"

    yield run
    for server in servers:
        server.shutdown()
        server.server_close()


class Waits(list[float]):
    """The client's ``sleep``: remembers each wait instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(url: str, **retry: Any) -> tuple[Api, Waits, io.StringIO]:
    waits, err = Waits(), io.StringIO()
    return Api(url, "t", retry=Retry(**retry), err=err, sleep=waits), waits, err


BUSY: Answer = (503, {"Retry-After": "2"})
OK: Answer = (200, {})


def test_a_read_waits_out_two_503s_as_asked_and_says_so(start):
    portal, url = start([BUSY, BUSY, OK])
    api, waits, err = client(url)
    assert api.get("jobs/42/") == JOB
    assert len(portal.seen) == 3 and waits == [2, 2]
    assert err.getvalue().splitlines() == [
        "qm: portal unavailable (503), retrying in 2 s (attempt 2 of 5)",
        "qm: portal unavailable (503), retrying in 2 s (attempt 3 of 5)",
    ]


@pytest.mark.parametrize("status", [502, 504])
def test_a_gateway_that_cannot_reach_the_portal_is_waited_out_too(start, status):
    portal, url = start([(status, {}), OK])
    api, waits, _ = client(url)
    assert api.get("jobs/42/") == JOB and waits == [1.0] and len(portal.seen) == 2  # none asked: the first backoff


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_puts_and_deletes_are_sent_again(start, method):
    portal, url = start([BUSY, OK])
    api, _, _ = client(url)
    api.request(method, "tokens/1/", {"name": "x"} if method == "PUT" else None)
    assert portal.seen == [f"{method} /api/v1/tokens/1/"] * 2


def test_a_submission_is_not_sent_twice(start):
    """The 503 may have come after the job was stored: only the caller can tell."""
    portal, url = start([BUSY, OK])
    api, waits, err = client(url)
    with pytest.raises(ApiError) as refused:
        api.post("jobs/", {"name": "train"})
    assert refused.value.status == 503 and "database is unavailable" in refused.value.describe()
    assert portal.seen == ["POST /api/v1/jobs/"] and waits == [] and err.getvalue() == ""


def test_an_edit_is_not_sent_twice(start):
    portal, url = start([BUSY, OK])
    api, _, _ = client(url)
    with pytest.raises(ApiError):
        api.patch("jobs/42/", {"nice": 10})
    assert len(portal.seen) == 1


def test_a_what_if_post_writes_nothing_and_is_sent_again(start):
    portal, url = start([BUSY, OK])
    api, _, _ = client(url)
    assert api.post("jobs/estimate/", {"name": "x"}, idempotent=True) == JOB
    assert len(portal.seen) == 2


def test_a_server_error_is_a_defect_and_is_not_retried(start):
    portal, url = start([(500, {}), OK])
    api, _, _ = client(url)
    with pytest.raises(ApiError):
        api.get("jobs/42/")
    assert len(portal.seen) == 1


def test_tries_are_bounded(start):
    portal, url = start([BUSY])
    api, waits, err = client(url, tries=3)
    with pytest.raises(ApiError) as refused:
        api.get("jobs/42/")
    assert refused.value.status == 503 and len(portal.seen) == 3 and waits == [2, 2]
    assert err.getvalue().splitlines()[-1].endswith("(attempt 3 of 3)")


def test_waiting_is_bounded_and_a_wait_past_the_budget_is_not_started(start):
    portal, url = start([(503, {"Retry-After": "40"})])
    api, waits, _ = client(url, seconds=60)
    with pytest.raises(ApiError):
        api.get("jobs/42/")
    assert waits == [40] and len(portal.seen) == 2  # a second 40 s would pass 60 s in all


def test_without_retry_after_waits_double(start):
    _, url = start([(503, {})] * 3 + [OK])
    api, waits, _ = client(url)
    api.get("jobs/42/")
    assert waits == [1, 2, 4]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_is_tried_again_even_for_a_submission(start):
    """Nothing reached the portal, so nothing can be done twice: the portal comes up
    while qm waits."""
    port = _free_port()
    api, _, err = client(f"http://127.0.0.1:{port}")
    portals: list[Portal] = []
    api.sleep = lambda seconds: portals.append(start([OK], port)[0])
    assert api.post("jobs/", {"name": "train"}) == JOB
    assert portals[0].seen == ["POST /api/v1/jobs/"]
    assert err.getvalue() == "qm: portal unreachable (connection refused), retrying in 1 s (attempt 2 of 5)\n"


def test_a_portal_that_stays_down_is_reported_as_unreachable():
    api, waits, _ = client(f"http://127.0.0.1:{_free_port()}", tries=2)
    with pytest.raises(urllib.error.URLError):
        api.get("jobs/")
    assert waits == [1.0]


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("5") == 5
    assert retry_after(formatdate(1_000_030, usegmt=True), now=1_000_000) == 30
    assert retry_after(formatdate(999_000, usegmt=True), now=1_000_000) == 0  # already past
    assert retry_after("soon") is None and retry_after(None) is None


def test_the_cli_rides_out_a_restart_and_tells_the_user(start):
    portal, url = start([BUSY, BUSY, OK])
    out, err, waits = io.StringIO(), io.StringIO(), Waits()
    code = main(["--url", url, "--token", "t", "--json", "show", "42"], out=out, err=err, sleep=waits)
    assert code == 0 and json.loads(out.getvalue()) == JOB and len(portal.seen) == 3
    assert "qm: portal unavailable (503), retrying in 2 s (attempt 3 of 5)" in err.getvalue()


def test_the_cli_gives_up_after_tries_and_says_why(start):
    portal, url = start([BUSY])
    out, err, waits = io.StringIO(), io.StringIO(), Waits()
    code = main(["--url", url, "--token", "t", "--tries", "2", "show", "42"], out=out, err=err, sleep=waits)
    assert code == 1 and len(portal.seen) == 2
    assert err.getvalue().splitlines()[-1] == f"qm: {UNAVAILABLE['detail']}"
