"""Readiness: the port from the job's log (only one inside SESSION_PORTS), the host from
the workload manager (``Backend.session_host``), written once; a backend that cannot
say where a session runs is a clear error, not a crash."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

import pytest

from scheduler.backends.base import BackendError, JobSpec, NodeInfo, Placement, PollResult, RemoteState
from scheduler.choices import JobState
from scheduler.clusters.dispatch import dispatch_jobs
from scheduler.clusters.poll import poll_cluster
from scheduler.core.types import Allocation
from scheduler.jobs import allocations
from scheduler.jobs.remote import backend_for
from scheduler.jobs.verbs import requeue_job
from scheduler.models import InteractiveSession, Job
from scheduler.reads.sessions import STARTING, phase_of
from scheduler.sessions.ready import refresh_readiness
from scheduler.sessions.script import READY_MARKER
from tests.builders import launch, start

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)


class FakeBackend:
    """A workload manager whose job log and node addresses the test writes. Readiness
    only reads a log and asks where a job runs: anything else it asked would fail."""

    kind: ClassVar[str] = "fake"
    requires_identity = False

    def __init__(self, log: str = "", host: str = "10.0.0.7") -> None:
        self.log, self.host = log, host
        self.asked: list[tuple[str, tuple[Placement, ...]]] = []

    def read_log(self, external_id: str, max_bytes: int = 65536) -> str:
        return self.log

    def session_host(self, external_id: str, placements: tuple[Placement, ...]) -> str:
        self.asked.append((external_id, placements))
        return self.host

    def submit(self, spec: JobSpec) -> str:
        raise AssertionError("readiness submits no job")

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str | BackendError]:
        raise AssertionError("readiness submits no job")

    def cancel(self, external_id: str, *, grace_seconds: float | None = None) -> None:
        raise AssertionError("readiness cancels no job")

    def poll(self, external_ids: Sequence[str]) -> dict[str, PollResult]:
        raise AssertionError("readiness polls no job: the cluster poll that asks for it does")

    def list_nodes(self) -> list[NodeInfo]:
        raise AssertionError("readiness lists no nodes")


class WithoutSessions:
    kind = "old"

    def read_log(self, external_id: str, max_bytes: int = 65536) -> str:
        return f"{READY_MARKER} port=20001\n"


def running_session(world) -> InteractiveSession:
    session = launch(world.alice, "jupyterlab")
    held = allocations.encode([Allocation("h100-02", (3,))])
    Job.objects.filter(pk=session.job_id).update(cluster=world.cluster, allocations=held)
    start(session.job, NOW)
    return InteractiveSession.objects.select_related("job", "job__cluster").get(pk=session.pk)


def test_the_ready_line_s_port_and_the_workload_manager_s_host_are_written_once(world):
    session = running_session(world)
    backend = FakeBackend(f"[I] starting\n{READY_MARKER} port=24242\n[I] more\n")

    assert refresh_readiness(session, backend=backend, now=NOW)

    stored = InteractiveSession.objects.get(pk=session.pk)
    assert (stored.host, stored.port, stored.ready_at) == ("10.0.0.7", 24242, NOW)
    assert backend.asked == [(session.job.external_id, (Placement("h100-02", (3,)),))]
    assert refresh_readiness(stored, backend=FakeBackend("", host="elsewhere"))  # already ready: nothing read again
    assert InteractiveSession.objects.get(pk=session.pk).host == "10.0.0.7"


@pytest.mark.parametrize(
    "log",
    [
        pytest.param("[I] starting\n", id="no ready line yet"),
        pytest.param(f"{READY_MARKER} port=5432\n", id="a port outside SESSION_PORTS is no port"),
        pytest.param(f"echo {READY_MARKER} port=20001\n", id="only a line of its own counts"),
    ],
)
def test_a_session_stays_starting_until_its_own_ready_line_names_a_session_port(world, log):
    session = running_session(world)

    assert not refresh_readiness(session, backend=FakeBackend(log), now=NOW)
    assert InteractiveSession.objects.get(pk=session.pk).ready_at is None


def test_a_queued_session_is_not_read(world):
    session = launch(world.alice, "jupyterlab")

    assert not refresh_readiness(session, backend=FakeBackend(f"{READY_MARKER} port=20001\n"), now=NOW)


def test_a_backend_that_cannot_say_where_a_session_runs_is_a_clear_error(world):
    session = running_session(world)

    with pytest.raises(BackendError, match="cannot run interactive sessions") as caught:
        refresh_readiness(session, backend=WithoutSessions(), now=NOW)  # type: ignore[arg-type]
    assert caught.value.permanent
    assert InteractiveSession.objects.get(pk=session.pk).ready_at is None


def test_the_local_cluster_s_sessions_listen_on_this_machine(world):
    assert backend_for(world.cluster).session_host("key", (Placement("h100-01", (0,)),)) == "127.0.0.1"


def test_the_cluster_poll_makes_a_session_ready_once_its_log_says_so(world, monkeypatch):
    session = running_session(world)
    backend = backend_for(world.cluster)
    running = {session.job.external_id: PollResult(session.job.external_id, RemoteState.RUNNING)}
    monkeypatch.setattr(type(backend), "poll", lambda self, keys: running)
    monkeypatch.setattr(type(backend), "read_log", lambda self, key, max_bytes=0: f"{READY_MARKER} port=21000\n")

    report = poll_cluster(world.cluster, NOW)

    assert report["sessions_ready"] == 1
    stored = InteractiveSession.objects.get(pk=session.pk)
    assert (stored.host, stored.port) == ("127.0.0.1", 21000)


def test_a_requeued_session_is_looked_for_afresh_when_its_next_attempt_is_dispatched(world, monkeypatch):
    session = running_session(world)
    assert refresh_readiness(session, backend=FakeBackend(f"{READY_MARKER} port=24242\n"), now=NOW)
    requeue_job(session.job, by="alice")
    held = allocations.encode([Allocation("h100-01", (0,))])
    Job.objects.filter(pk=session.job_id).update(state=JobState.DISPATCHING, cluster=world.cluster, allocations=held)
    monkeypatch.setattr(type(backend_for(world.cluster)), "submit_many", lambda self, specs: ["ext-again"])

    dispatch_jobs([session.job_id])

    again = InteractiveSession.objects.select_related("job", "app").get(pk=session.pk)
    assert (again.job.state, again.job.external_id) == (JobState.RUNNING, "ext-again")
    assert (again.host, again.port, again.ready_at) == ("", None, None)
    assert phase_of(again) == STARTING
