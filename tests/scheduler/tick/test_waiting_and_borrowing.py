"""What the tick stores about waiting jobs (every blocker) and borrowed capacity (reclaim)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from people.models import Quota
from scheduler.choices import JobState
from scheduler.core.types import Blocker, Decisions, PendingReason
from scheduler.jobs.verbs import cancel_job, hold_job, release_job
from scheduler.models import Job
from scheduler.tick.apply import store_waiting
from scheduler.tick.snapshot import load_snapshot
from tests.builders import local_node_group, make_account, make_local_cluster, submit

pytestmark = pytest.mark.django_db


def test_a_waiting_job_stores_every_blocker_and_the_api_shows_them(world, tick, client_for):
    Quota.objects.create(account=world.lab, max_gpus=8)
    submit(world.charlie, world.other, gpus_per_node=8, gpu_model="H100-80GB", command="sleep 30")
    for _ in range(2):
        submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", command="sleep 30")
    tick()
    waiting = Job.objects.get(state=JobState.PENDING)
    assert [b["code"] for b in waiting.pending_blockers] == ["AccountGpuLimit", "Resources"]
    assert waiting.pending_blockers[0]["message"] == "account lab holds 8 of its 8 GPUs; this job needs 8"

    body = client_for(world.alice).get(f"/api/v1/jobs/{waiting.id}/").json()
    assert body["pending_reason"] == "AccountGpuLimit"
    # As stored, each with its code's title added as the API reads it.
    assert [b.pop("title") for b in body["pending_blockers"]] == [
        "Its account is at its GPU quota",
        "Waiting for free GPUs, CPUs or memory",
    ]
    assert body["pending_blockers"] == waiting.pending_blockers
    for job in Job.objects.filter(state=JobState.RUNNING):
        cancel_job(job, by="test")


def test_a_job_stored_with_a_reason_but_no_blockers_reads_in_the_reasons_words(world, client_for):
    """Rows from before blockers were stored (or a reason the tick has not explained yet)
    still get a title and a sentence, from the one table, not the bare code."""
    job = submit(world.alice, world.lab)
    Job.objects.filter(pk=job.pk).update(pending_reason="Dependency", pending_blockers=[])
    body = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()
    assert body["pending_blockers"] == [
        {
            "code": "Dependency",
            "title": "Waiting for the jobs it depends on",
            "message": "It waits for the jobs it depends on.",
            "evidence": {},
        }
    ]


def test_reasons_are_written_only_to_jobs_still_pending_and_only_when_they_changed(world):
    """Many waiting jobs at once (one statement on PostgreSQL, a prepared one on SQLite):
    a job cancelled while the cycle ran keeps what its cancel wrote, and a job whose
    reason and blockers are unchanged is not written again."""
    jobs = [
        submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", command="sleep 30") for _ in range(6)
    ]
    blockers = (Blocker(PendingReason.RESOURCES, "no node has 8 H100-80GB GPUs free", {"best": 6}),)
    decisions = Decisions(
        pending_reasons={job.id: PendingReason.RESOURCES for job in jobs},
        blockers={job.id: blockers for job in jobs},
    )
    cancelled = jobs[0]
    Job.objects.filter(pk=cancelled.pk).update(state=JobState.CANCELLED, pending_reason="")
    loaded = load_snapshot()
    assert store_waiting(decisions, loaded) == 6  # the cancelled one was asked too
    stored = {j.id: j for j in Job.objects.filter(pk__in=[job.id for job in jobs])}
    assert stored[cancelled.id].pending_reason == "" and stored[cancelled.id].pending_blockers == []
    for job in jobs[1:]:
        assert stored[job.id].pending_reason == "Resources"
        assert stored[job.id].pending_blockers == [
            {"code": "Resources", "message": "no node has 8 H100-80GB GPUs free", "evidence": {"best": 6}}
        ]
    # The next cycle says the same of the jobs still waiting: nothing to write.
    again = Decisions(
        pending_reasons={job.id: PendingReason.RESOURCES for job in jobs[1:]},
        blockers={job.id: blockers for job in jobs[1:]},
    )
    assert store_waiting(again, load_snapshot()) == 0


def test_a_job_the_cycle_stopped_short_of_keeps_its_place_in_line_reason(world):
    """SchedCycleLimit says the cycle did not look at the job: one already told it waits
    its turn (Priority, Resources) keeps that, unwritten; any other reason, or none yet,
    is replaced."""
    in_line, new, was_blocked = (submit(world.alice, world.lab) for _ in range(3))
    Job.objects.filter(pk=in_line.pk).update(pending_reason="Priority")
    Job.objects.filter(pk=was_blocked.pk).update(pending_reason="Dependency")
    limit = (Blocker(PendingReason.CYCLE_LIMIT, "this cycle started its maximum of 1 jobs before reaching it", {}),)
    decisions = Decisions(
        pending_reasons={job.id: PendingReason.CYCLE_LIMIT for job in (in_line, new, was_blocked)},
        blockers={job.id: limit for job in (in_line, new, was_blocked)},
    )
    assert store_waiting(decisions, load_snapshot()) == 2
    reasons = dict(Job.objects.values_list("id", "pending_reason"))
    assert (reasons[in_line.id], reasons[new.id], reasons[was_blocked.id]) == (
        "Priority",
        "SchedCycleLimit",
        "SchedCycleLimit",
    )


def test_held_jobs_say_who_held_them_and_release_clears_it(world, client_for):
    job = submit(world.alice, world.lab)
    hold_job(job, by="alice")
    body = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()
    assert body["pending_blockers"][0]["code"] == "JobHeldUser"
    assert body["pending_blockers"][0]["evidence"] == {"by": "alice"}
    job.refresh_from_db()
    release_job(job, by="alice")
    job.refresh_from_db()
    assert job.pending_blockers == [] and job.pending_reason == ""


def test_an_account_below_its_guarantee_reclaims_a_borrowed_node(world, tick, settings):
    """lab is guaranteed 2 GPUs and borrows the only node; other (guarantee 2) then
    needs 2: the borrowed job is requeued for it, and the new job is not borrowed."""
    settings.SCHEDULER_PREEMPT_MIN_RUNTIME_SECONDS = 0
    world.cluster.delete()
    world.cluster = make_local_cluster("tiny", [local_node_group("t-01", gpus=4)])
    Quota.objects.create(account=world.lab, guaranteed_gpus=2)
    Quota.objects.create(account=world.other, guaranteed_gpus=2)
    inside = submit(world.alice, world.lab, gpus_per_node=2, command="sleep 60")
    tick()
    Job.objects.filter(pk=inside.pk).update(started_at=timezone.now() - timedelta(hours=2))
    beyond = submit(world.alice, world.lab, gpus_per_node=2, command="sleep 60")
    tick()
    assert list(Job.objects.filter(state=JobState.RUNNING).order_by("id").values_list("id", "borrowed")) == [
        (inside.id, False),
        (beyond.id, True),
    ]

    claim = submit(world.charlie, world.other, gpus_per_node=2, command="sleep 60")
    tick()
    claim.refresh_from_db()
    beyond.refresh_from_db()
    assert (claim.state, claim.borrowed) == (JobState.RUNNING, False)
    assert (beyond.state, beyond.borrowed, beyond.attempt) == (JobState.PENDING, False, 1)
    event = beyond.events.get(kind="preempted")
    assert event.data["by"] == claim.id and "below its guarantee" in event.message
    for job in Job.objects.filter(state=JobState.RUNNING):
        cancel_job(job, by="test")


def test_a_subaccount_guarantee_counts_toward_its_parent(world, tick):
    research = make_account("research")
    world.lab.parent = research
    world.lab.save()
    Quota.objects.create(account=research, guaranteed_gpus=1)
    jobs = [submit(world.alice, world.lab, command="sleep 30") for _ in range(2)]
    tick()
    assert list(Job.objects.filter(pk__in=[j.id for j in jobs]).order_by("id").values_list("borrowed", flat=True)) == [
        False,
        True,
    ]
    for job in Job.objects.filter(state=JobState.RUNNING):
        cancel_job(job, by="test")


@pytest.mark.parametrize(
    "body,field",
    [
        ({"user": "alice", "guaranteed_gpus": 4}, "guaranteed_gpus"),
        ({"user": "alice", "borrowing_limit_gpus": 4}, "borrowing_limit_gpus"),
        ({"account": "lab", "borrowing_limit_gpus": 4}, "borrowing_limit_gpus"),
        ({"account": "lab", "guaranteed_gpus": -1}, "guaranteed_gpus"),
    ],
)
def test_bad_guarantees_are_refused_with_the_field_named(world, client_for, body, field):
    response = client_for(world.admin).post("/api/v1/quotas/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Quota.objects.exists()


def test_an_admin_sets_a_guarantee_with_a_borrowing_limit(world, client_for):
    body = {"account": "lab", "guaranteed_gpus": 16, "borrowing_limit_gpus": 8}
    response = client_for(world.admin).post("/api/v1/quotas/", body, format="json")
    assert response.status_code == 201, response.json()
    quota = Quota.objects.get(account=world.lab)
    assert (quota.guaranteed_gpus, quota.borrowing_limit_gpus) == (16, 8)
