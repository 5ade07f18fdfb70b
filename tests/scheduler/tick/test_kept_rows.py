"""The tick keeps its views of jobs and nodes between ticks and reads again only the rows
that changed (``scheduler.tick.kept``): whatever a writer changes, the next snapshot is
the one a full read builds, and what did not change is not read again.

On PostgreSQL only: elsewhere every load is a full read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from common.db.bulk import update_versioned_rows
from people.models import Account, Qos
from scheduler.choices import JobState, NodeState
from scheduler.core.carry import Carry, holds_each_gpu_once
from scheduler.core.types import Allocation, RunningJob
from scheduler.models import Gpu, Job, Node
from scheduler.tick import snapshot as snapshots
from scheduler.tick.run import run_tick
from scheduler.tick.snapshot import LoadedSnapshot, load_snapshot
from tests.builders import start, submit

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@contextmanager
def full_read() -> Iterator[None]:
    """Loads that keep nothing, as on a database without row versions."""
    with (
        mock.patch("scheduler.tick.kept.versioned", return_value=False),
        mock.patch.object(snapshots, "versioned", return_value=False),
    ):
        yield


def fresh() -> LoadedSnapshot:
    with full_read():
        return load_snapshot()


def same_as_a_full_read(loaded: LoadedSnapshot) -> None:
    expected = fresh()
    by_id = {job.id: job for job in expected.snapshot.pending}
    assert {job.id: job for job in loaded.snapshot.pending} == by_id
    assert {job.id: job for job in loaded.snapshot.running} == {job.id: job for job in expected.snapshot.running}
    assert (loaded.pending_reasons, loaded.pending_blockers, loaded.borrowed) == (
        expected.pending_reasons,
        expected.pending_blockers,
        expected.borrowed,
    )
    assert loaded.snapshot.nodes == expected.snapshot.nodes


@pytest.fixture
def queue(world: Any) -> list[Job]:
    jobs = [submit(world.alice, world.lab, nice=i) for i in range(4)] + [submit(world.charlie, world.other)]
    start(jobs[3], AT)
    load_snapshot()  # keeps everything
    return jobs


def test_nothing_changed_nothing_is_read_again_and_the_nodes_are_the_same_object(queue: list[Job]) -> None:
    before = load_snapshot()
    again = load_snapshot()
    assert snapshots._pending_rows.built == 0 and snapshots._active_rows.built == 0
    assert again.snapshot.nodes is before.snapshot.nodes  # the core's per-shape answers stay
    same_as_a_full_read(again)


def test_a_row_written_by_anyone_any_way_is_read_again(queue: list[Job], world: Any) -> None:
    # A bare UPDATE (no updated_at, no signal), as a hand-typed one would be.
    Job.objects.filter(pk=queue[0].pk).update(nice=50)
    loaded = load_snapshot()
    assert snapshots._pending_rows.built == 1
    assert next(j for j in loaded.snapshot.pending if j.id == queue[0].id).nice == 50
    same_as_a_full_read(loaded)


def test_a_row_written_twice_in_one_transaction_is_read_each_time(queue: list[Job]) -> None:
    """Both versions carry the transaction's id: the version's place tells them apart."""
    with transaction.atomic():
        Job.objects.filter(pk=queue[0].pk).update(nice=1)
        assert next(j for j in load_snapshot().snapshot.pending if j.id == queue[0].id).nice == 1
        Job.objects.filter(pk=queue[0].pk).update(nice=2)
        assert next(j for j in load_snapshot().snapshot.pending if j.id == queue[0].id).nice == 2


def test_renamed_accounts_users_and_qos_reach_their_jobs(queue: list[Job], world: Any) -> None:
    qos = Qos.objects.create(name="normal", priority=1)
    Job.objects.filter(pk=queue[1].pk).update(qos=qos)
    load_snapshot()
    Account.objects.filter(pk=world.lab.pk).update(name="lab2")
    get_user_model().objects.filter(pk=world.charlie.pk).update(username="charles")
    Qos.objects.filter(pk=qos.pk).update(name="high")
    loaded = load_snapshot()
    jobs = {job.id: job for job in loaded.snapshot.pending}
    assert jobs[queue[0].id].account == "lab2"
    assert jobs[queue[4].id].user == "charles"
    assert jobs[queue[1].id].qos == "high"
    assert next(j for j in loaded.snapshot.running if j.id == queue[3].id).account == "lab2"
    same_as_a_full_read(loaded)


def test_jobs_that_come_leave_or_change_state_come_and_go(queue: list[Job], world: Any) -> None:
    Job.objects.filter(pk=queue[0].pk).update(state=JobState.HELD)
    Job.objects.filter(pk=queue[1].pk).delete()
    newcomer = submit(world.dora, world.lab)
    Job.objects.filter(pk=queue[3].pk).update(state=JobState.COMPLETED)
    start(queue[2], AT)
    loaded = load_snapshot()
    assert {j.id for j in loaded.snapshot.pending} == {queue[4].id, newcomer.id}
    assert {j.id for j in loaded.snapshot.running} == {queue[2].id}
    same_as_a_full_read(loaded)


def test_node_and_gpu_changes_make_new_node_views(queue: list[Job], world: Any) -> None:
    before = load_snapshot().snapshot.nodes
    Node.objects.filter(name="l4-01").update(last_heartbeat=AT)  # not part of a view
    assert load_snapshot().snapshot.nodes is before
    Node.objects.filter(name="l4-01").update(state=NodeState.DRAIN)
    drained = load_snapshot().snapshot.nodes
    assert drained is not before and not next(n for n in drained if n.name == "l4-01").schedulable
    gpu = Gpu.objects.filter(node__name="h100-01").order_by("index").first()
    assert gpu is not None
    Gpu.objects.filter(pk=gpu.pk).update(memory_mib=1024)
    loaded = load_snapshot()
    assert next(n for n in loaded.snapshot.nodes if n.name == "h100-01").gpus[0].memory_mib == 1024
    world.cluster.enabled = False
    world.cluster.save()
    assert load_snapshot().snapshot.nodes == ()
    same_as_a_full_read(load_snapshot())


def test_reasons_the_tick_writes_are_kept_and_not_read_again(queue: list[Job], tick: Any) -> None:
    Node.objects.update(state=NodeState.DRAIN)  # nothing starts: every job gets a reason
    tick()
    assert Job.objects.filter(state=JobState.PENDING).exclude(pending_reason="").count() == 4
    loaded = load_snapshot()
    assert snapshots._pending_rows.built == 0
    same_as_a_full_read(loaded)


def test_a_tick_that_rolls_back_leaves_nothing_kept_that_did_not_happen(queue: list[Job], world: Any) -> None:
    """Its reasons were noted under versions that never committed, and its ledger took
    starts that never happened: the next load reads those rows again, and the next tick
    decides as a process that kept nothing would."""
    Node.objects.exclude(name="l4-01").update(state=NodeState.DRAIN)  # room for a few starts only

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        assert run_tick().started
        raise Abort
    assert Job.objects.filter(state=JobState.PENDING).count() == 4
    same_as_a_full_read(load_snapshot())
    kept = run_tick()
    with mock.patch("scheduler.tick.run._carry", Carry()):
        Job.objects.filter(state=JobState.DISPATCHING).update(state=JobState.PENDING, allocations=[], cluster=None)
        with full_read():
            fresh_start = run_tick()
    assert fresh_start.started == kept.started


def test_a_reason_is_written_only_on_the_version_the_tick_read(queue: list[Job]) -> None:
    """A job written after the snapshot (a hold, a new nice) keeps its stored reason: the
    next tick looks at it as it is now."""
    loaded = load_snapshot()
    ids = [queue[0].id, queue[1].id]
    versions = [snapshots._pending_rows.version(i) for i in ids]
    assert None not in versions and loaded.pending_reasons[ids[0]] == ""
    Job.objects.filter(pk=ids[1]).update(nice=7)
    written = update_versioned_rows(
        Job,
        ids,
        [str(v) for v in versions],
        {"pending_reason": ["Resources", "Resources"], "pending_blockers": [[], []]},
        where={"state": JobState.PENDING},
    )
    assert [row[0] for row in written] == [ids[0]]
    assert written[0][2:] == ("Resources", "[]")
    assert dict(Job.objects.filter(pk__in=ids).values_list("id", "pending_reason")) == {
        ids[0]: "Resources",
        ids[1]: "",
    }


def test_a_gpu_held_twice_keeps_the_tick_from_carrying_its_ledger() -> None:
    one = RunningJob(1, (Allocation("n1", (0, 1)),))
    other = RunningJob(2, (Allocation("n1", (2,)),))
    shared = RunningJob(3, (Allocation("n1", (3,), gpu_share=0.5),))
    again_shared = RunningJob(4, (Allocation("n1", (3,), gpu_share=0.25),))
    assert holds_each_gpu_once((one, other, shared, again_shared))
    assert not holds_each_gpu_once((one, RunningJob(5, (Allocation("n1", (1,)),))))
    assert not holds_each_gpu_once((shared, RunningJob(5, (Allocation("n1", (3,)),))))
    assert not holds_each_gpu_once((RunningJob(5, (Allocation("n1", (3,)),)), shared))
