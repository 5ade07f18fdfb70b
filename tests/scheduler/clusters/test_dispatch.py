"""Handing claimed jobs to their backend: every hand-off is counted before the backend
sees it (only an attempt's first may skip the backend's lookup by key), and a batch the
backend took is marked RUNNING in one statement, job by job only where the job is still
DISPATCHING at the attempt handed off."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduler.backends.base import Backend, BackendError, JobSpec
from scheduler.choices import EventKind, JobState
from scheduler.clusters import dispatch
from scheduler.jobs.remote import backend_for
from scheduler.jobs.transitions import FRESH_ATTEMPT
from scheduler.models import Job, JobEvent
from scheduler.tick.run import run_tick
from tests.builders import submit

pytestmark = pytest.mark.django_db


class Recording:
    """The cluster's real backend, noting what it is handed and what it is told to
    cancel; ``meanwhile`` runs after the batch was submitted, before it is marked."""

    def __init__(self, real: Backend, meanwhile: Callable[[list[str]], None] | None = None) -> None:
        self.real, self.meanwhile = real, meanwhile
        self.handed: list[JobSpec] = []
        self.submitted: dict[str, str] = {}  # key -> the backend's id
        self.cancelled: list[str] = []

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str | BackendError]:
        self.handed.extend(specs)
        outcomes = self.real.submit_many(specs)
        self.submitted.update((s.key, o) for s, o in zip(specs, outcomes, strict=True) if isinstance(o, str))
        if self.meanwhile is not None:
            self.meanwhile([o for o in outcomes if isinstance(o, str)])
        return outcomes

    def cancel(self, external_id: str, **kwargs: Any) -> None:
        self.cancelled.append(external_id)
        self.real.cancel(external_id, **kwargs)


@pytest.fixture
def claimed(world: Any) -> Callable[[int], list[Job]]:
    """``claimed(n)``: ``n`` one-GPU jobs the tick has claimed (DISPATCHING), not yet
    handed to the backend (the tick's after-commit hand-off is not run)."""
    world.cluster.config = {**world.cluster.config, "simulate": 30}
    world.cluster.save()

    def claim(n: int) -> list[Job]:
        jobs = [submit(world.alice, world.lab, gpus_per_node=1) for _ in range(n)]
        run_tick()
        ids = [job.id for job in jobs]
        assert set(Job.objects.filter(pk__in=ids).values_list("state", flat=True)) == {JobState.DISPATCHING}
        return list(Job.objects.filter(pk__in=ids).order_by("id"))

    return claim


def recording(monkeypatch: Any, world: Any, meanwhile: Callable[[list[str]], None] | None = None) -> Recording:
    backend = Recording(backend_for(world.cluster), meanwhile)
    monkeypatch.setattr(dispatch, "backend_for", lambda cluster: backend)
    return backend


def test_only_an_attempts_first_hand_off_tells_the_backend_it_may_skip_its_lookup(world, claimed, monkeypatch):
    backend = recording(monkeypatch, world)
    jobs = claimed(2)
    ids = [job.id for job in jobs]

    assert dispatch.dispatch_jobs(ids) == []
    assert [spec.first_handoff for spec in backend.handed] == [True, True]
    assert list(Job.objects.filter(pk__in=ids).values_list("handoffs", flat=True)) == [1, 1]

    # The RUNNING marks were lost (a crash after submit): handed off again, the backend
    # must look for what it was given the first time.
    Job.objects.filter(pk__in=ids).update(state=JobState.DISPATCHING)
    backend.handed.clear()
    dispatch.dispatch_jobs(ids)
    assert [spec.first_handoff for spec in backend.handed] == [False, False]
    assert [spec.key for spec in backend.handed] == [job.backend_key for job in jobs]


def test_a_new_attempt_starts_its_count_again():
    assert FRESH_ATTEMPT["handoffs"] == 0  # every requeue path writes FRESH_ATTEMPT with attempt + 1


def test_a_job_handed_off_inside_an_open_transaction_is_refused_not_counted(world, claimed, monkeypatch):
    """A rollback could forget a count after the backend took the job, and the next
    hand-off would then skip the lookup and submit it twice."""
    backend = recording(monkeypatch, world)
    (job,) = claimed(1)

    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        dispatch.dispatch_jobs([job.id])
    assert backend.handed == []


def test_a_job_cancelled_or_requeued_while_its_batch_was_submitted_is_not_marked_running(world, claimed, monkeypatch):
    jobs = claimed(3)
    cancelled, requeued, kept = jobs

    def meanwhile(_: list[str]) -> None:
        Job.objects.filter(pk=cancelled.pk).update(state=JobState.CANCELLED)
        # requeued and claimed again at once: DISPATCHING still, but a newer attempt
        Job.objects.filter(pk=requeued.pk).update(attempt=requeued.attempt + 1)

    backend = recording(monkeypatch, world, meanwhile)
    dispatch.dispatch_jobs([job.id for job in jobs])

    states = dict(Job.objects.filter(pk__in=[j.id for j in jobs]).values_list("id", "state"))
    assert states == {cancelled.id: JobState.CANCELLED, requeued.id: JobState.DISPATCHING, kept.id: JobState.RUNNING}
    kept.refresh_from_db()
    assert (kept.external_id, kept.started_at is not None) == (backend.submitted[kept.backend_key], True)
    assert sorted(backend.cancelled) == sorted(backend.submitted[job.backend_key] for job in (cancelled, requeued))
    events = list(JobEvent.objects.filter(kind=EventKind.DISPATCHED).values_list("job_id", "message"))
    assert events == [(kept.id, f"running on {world.cluster.name} as {kept.external_id}")]


@pytest.mark.postgres  # SQLite, in-process, runs one prepared UPDATE per row by design (common.db.bulk)
def test_marking_a_batch_running_costs_the_same_statements_for_two_jobs_as_for_six(world, claimed, monkeypatch):
    recording(monkeypatch, world)

    def statements(n: int) -> int:
        ids = [job.id for job in claimed(n)]
        with CaptureQueriesContext(connection) as queries:
            dispatch.dispatch_jobs(ids)
        assert set(Job.objects.filter(pk__in=ids).values_list("state", flat=True)) == {JobState.RUNNING}
        Job.objects.filter(pk__in=ids).update(state=JobState.COMPLETED)
        return len(queries.captured_queries)

    assert statements(2) == statements(6)
