"""The node agent: one batch as JSON with --print, buffering while the portal is away."""

from __future__ import annotations

import io
import json
import urllib.error
from contextlib import contextmanager
from datetime import UTC, datetime
from email.message import Message

import pytest

from agent import main as agent
from agent.collectors.base import Reading


class OneGpu:
    name = "fake"

    def collect(self):
        return [Reading(index=0, uuid="GPU-a", utilization_pct=12.5, memory_used_mib=100, temperature_c=40.0)]


def test_a_batch_is_one_reading_per_gpu_with_one_timestamp():
    [payload] = agent.batch(OneGpu(), datetime(2026, 1, 1, 12, 0, 0, 999, tzinfo=UTC))
    assert payload == {
        "index": 0,
        "at": "2026-01-01T12:00:00+00:00",
        "utilization_pct": 12.5,
        "memory_used_mib": 100,
        "uuid": "GPU-a",
        "temperature_c": 40.0,
    }


def test_once_print_prints_the_batch_without_posting(monkeypatch, capsys):
    monkeypatch.setattr(agent, "make_collector", lambda args: OneGpu())
    assert agent.main(["--once", "--print", "--node", "n1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["node"] == "n1" and printed["samples"][0]["utilization_pct"] == 12.5


def test_posting_needs_a_portal_and_token(monkeypatch):
    monkeypatch.delenv("QM_PORTAL_URL", raising=False)
    monkeypatch.delenv("QM_NODE_TOKEN", raising=False)
    with pytest.raises(SystemExit):
        agent.parse_args(["--once"])


class FlakyPortal:
    """Answers like the ingest API, or fails while ``down``."""

    def __init__(self):
        self.down = True
        self.received: list[dict] = []

    @contextmanager
    def __call__(self, request, timeout):
        if self.down:
            raise urllib.error.URLError("connection refused")
        body = json.loads(request.data)
        assert request.headers["Authorization"] == "Bearer tok"
        self.received.append(body)
        yield io.BytesIO(json.dumps({"accepted": len(body["samples"]), "rejected": []}).encode())


def test_samples_wait_while_the_portal_is_unreachable_then_go_out_in_order():
    portal = FlakyPortal()
    sender = agent.Sender("http://portal", "tok", "n1", post=portal)
    sender.add([{"at": "t1"}])
    assert sender.flush() == 0 and len(sender.pending) == 1
    sender.add([{"at": "t2"}])
    portal.down = False
    assert sender.flush() == 2
    assert [s["at"] for s in portal.received[0]["samples"]] == ["t1", "t2"]
    assert portal.received[0]["node"] == "n1" and not sender.pending


def test_the_buffer_is_bounded_and_drops_the_oldest():
    sender = agent.Sender("http://portal", "tok", "n1", buffer=3, post=FlakyPortal())
    sender.add([{"at": f"t{i}"} for i in range(5)])
    assert [s["at"] for s in sender.pending] == ["t2", "t3", "t4"]


def test_a_batch_the_portal_refuses_as_invalid_is_dropped_not_retried_forever():
    def refuse(request, timeout):
        raise urllib.error.HTTPError(request.full_url, 400, "Bad Request", Message(), io.BytesIO(b'{"rejected": []}'))

    sender = agent.Sender("http://portal", "tok", "n1", post=refuse)
    sender.add([{"at": "bad"}])
    sender.flush()
    assert not sender.pending


def test_an_auth_error_keeps_the_samples():
    def forbid(request, timeout):
        raise urllib.error.HTTPError(request.full_url, 403, "Forbidden", Message(), io.BytesIO(b"{}"))

    sender = agent.Sender("http://portal", "tok", "n1", post=forbid)
    sender.add([{"at": "t1"}])
    sender.flush()
    assert len(sender.pending) == 1
