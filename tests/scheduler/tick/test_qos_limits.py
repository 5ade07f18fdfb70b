"""A tick holds back the jobs a QOS limit caps, stores why with the figures, and sees a
limit set between two ticks at the second.

Personas (tests/conftest.py): alice and dora are members of lab; the test cluster has
two 8-GPU H100 nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from people.models import Qos
from scheduler.choices import JobState
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from tests.builders import submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def debug(world: Any) -> Iterator[Qos]:
    """The usual debug lane, for lab: 2 GPUs per user; running jobs are cancelled after."""
    lane = Qos.objects.create(name="debug", max_gpus_per_user=2, max_walltime_seconds=3600)
    world.lab.allowed_qos.add(lane)
    yield lane
    for job in Job.objects.filter(state__in=[JobState.RUNNING, JobState.DISPATCHING]):
        cancel_job(job, by="test")


def states(jobs: list[Job]) -> list[tuple[str, str]]:
    return list(Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk").values_list("state", "pending_reason"))


def test_alices_third_debug_gpu_waits_with_qos_max_gres_per_user_and_the_api_says_why(
    world: Any, tick: Any, client_for: Any, debug: Qos
) -> None:
    jobs = [submit(world.alice, world.lab, qos=debug, command="sleep 30") for _ in range(3)]
    doras = submit(world.dora, world.lab, qos=debug, command="sleep 30")

    tick()

    assert states([*jobs, doras]) == [
        (JobState.RUNNING, ""),
        (JobState.RUNNING, ""),
        (JobState.PENDING, "QOSMaxGRESPerUser"),
        (JobState.RUNNING, ""),
    ]
    body = client_for(world.alice).get(f"/api/v1/jobs/{jobs[2].pk}/").json()
    assert body["pending_reason"] == "QOSMaxGRESPerUser"
    assert body["pending_blockers"][0] == {
        "code": "QOSMaxGRESPerUser",
        "title": "Its owner holds all the GPUs its QOS allows a user",
        "message": "alice holds 2 of the 2 GPUs QOS debug allows a user; this job needs 1",
        "evidence": {
            "scope": "qos",
            "name": "debug",
            "limit": "max_gpus_per_user",
            "user": "alice",
            "used": 2,
            "cap": 2,
            "requested": 1,
        },
    }


def test_a_running_jobs_limit_set_between_two_ticks_holds_at_the_second(world: Any, tick: Any, debug: Qos) -> None:
    """The tick keeps the QOS table's loads while its digest holds (PostgreSQL): a limit
    written between two ticks changes the digest, and the second tick enforces it."""
    tick()  # the tick has read (and, on PostgreSQL, kept) the QOS limits: 2 GPUs per user
    Qos.objects.filter(pk=debug.pk).update(max_running_jobs_per_user=1)
    jobs = [submit(world.alice, world.lab, qos=debug, command="sleep 30") for _ in range(2)]

    tick()

    assert states(jobs) == [(JobState.RUNNING, ""), (JobState.PENDING, "QOSMaxJobsPerUserLimit")]
    Qos.objects.filter(pk=debug.pk).update(max_running_jobs_per_user=None)

    tick()

    assert states(jobs) == [(JobState.RUNNING, ""), (JobState.RUNNING, "")]


def test_the_group_cap_counts_every_users_jobs_in_the_qos(world: Any, tick: Any, debug: Qos) -> None:
    Qos.objects.filter(pk=debug.pk).update(max_gpus=3)
    alices = submit(world.alice, world.lab, qos=debug, gpus_per_node=2, command="sleep 30")
    doras = submit(world.dora, world.lab, qos=debug, gpus_per_node=2, command="sleep 30")

    tick()

    assert states([alices, doras]) == [(JobState.RUNNING, ""), (JobState.PENDING, "QOSGrpGRES")]
    blocker = Job.objects.get(pk=doras.pk).pending_blockers[0]
    assert blocker["message"] == "the running jobs of QOS debug hold 2 of the 3 GPUs it allows in all; this job needs 2"
