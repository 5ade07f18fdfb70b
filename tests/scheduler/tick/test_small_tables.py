"""The small tables the tick reads whole (QOS, accounts, quotas, ...) are loaded again
only when one of them changed: one digest query per tick on PostgreSQL says which. A
change made between two ticks is always seen by the second."""

from __future__ import annotations

import pytest

from people.models import Account, Qos, Quota
from scheduler.choices import JobState
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from scheduler.tick.small_tables import UNVERSIONED, TableDigests
from tests.builders import submit

pytestmark = pytest.mark.django_db


def counting_load(calls: list[int]):  # type: ignore[no-untyped-def]
    def load() -> dict[str, int]:
        calls.append(1)
        return dict(Qos.objects.values_list("name", "priority"))

    return load


@pytest.mark.postgres
def test_a_load_is_kept_while_its_tables_are_unchanged_and_run_again_after_any_write(world):
    calls: list[int] = []
    load = counting_load(calls)
    Qos.objects.create(name="high", priority=10)

    assert TableDigests.read().kept(load, Qos) == {"high": 10}
    Account.objects.create(name="elsewhere")  # a table the load does not read
    assert TableDigests.read().kept(load, Qos) == {"high": 10}
    assert len(calls) == 1

    Qos.objects.filter(name="high").update(priority=20)
    assert TableDigests.read().kept(load, Qos) == {"high": 20}
    Qos.objects.create(name="low", priority=1)
    assert TableDigests.read().kept(load, Qos) == {"high": 20, "low": 1}
    Qos.objects.filter(name="low").delete()
    assert TableDigests.read().kept(load, Qos) == {"high": 20}
    assert len(calls) == 4


def test_without_row_versions_every_load_runs():
    calls: list[int] = []
    load = counting_load(calls)
    UNVERSIONED.kept(load, Qos)
    UNVERSIONED.kept(load, Qos)
    assert len(calls) == 2


def test_a_quota_set_between_two_ticks_holds_at_the_second(world, tick):
    tick()  # the tick has read (and, on PostgreSQL, kept) the quotas: none
    Quota.objects.create(account=world.lab, max_gpus=1)
    jobs = [submit(world.alice, world.lab, gpus_per_node=1, command="sleep 30") for _ in range(2)]

    tick()

    states = sorted(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("state", "pending_reason"))
    assert states == [(JobState.PENDING, "AccountGpuLimit"), (JobState.RUNNING, "")]
    for job in Job.objects.filter(state=JobState.RUNNING):
        cancel_job(job, by="test")
