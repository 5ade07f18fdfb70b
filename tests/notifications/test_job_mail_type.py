"""A job's own ``--mail-type`` decides which of its starts, ends and requeues its owner
is told of, whatever the owner chose for their jobs in general; the owner's channels
carry them. Through a real HTTP receiver (the webhook) and Django's test mailbox.

Personas (tests/conftest.py): alice (alice@example.org) is a member of lab.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from notifications.models import Event, Preference
from notifications.outbox import pump
from scheduler.choices import EventKind, JobState
from scheduler.jobs.array_spec import parse_array
from scheduler.jobs.submit import submit_job
from scheduler.jobs.transitions import record_event, transition
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from tests.builders import submit

pytestmark = pytest.mark.django_db


def later(seconds: float = 10) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def run_and_end(job: Job, to: str = JobState.COMPLETED) -> None:
    """The transitions a job's life writes (dispatch, then the poll that saw it end)."""
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running on test")
    code = 0 if to == JobState.COMPLETED else 1
    transition(job.id, [JobState.RUNNING], to, data={"exit_code": code}, exit_code=code)


def requeue(job: Job) -> None:
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running on test")
    transition(job.id, [JobState.RUNNING], JobState.PENDING, event=EventKind.PREEMPTED, message="preempted by 9")


@pytest.fixture
def told(world, receiver):
    """alice wants to hear of everything, by webhook; ``told()`` -> the subjects sent."""
    Preference.objects.create(user=world.alice, events=[e.value for e in Event], email=False, webhook_url=receiver.url)

    def subjects() -> list[str]:
        pump(later())
        return sorted(json.loads(body)["subject"] for _, body in receiver.received)

    return subjects


def test_a_script_asking_for_end_is_told_its_end_but_not_its_start_which_the_owner_chose(world, client_for, told):
    response = client_for(world.alice).post(
        "/api/v1/jobs/",
        {"script": "#!/bin/bash\n#SBATCH -J train -t 10 --mail-type=END\npython3 train.py\n"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get()

    run_and_end(job)

    assert told() == [f"Completed: job {job.id} (train)"]


def test_none_tells_nothing_of_a_jobs_start_end_or_requeue(world, told):
    ended, requeued = submit(world.alice, world.lab, mail_events=[]), submit(world.alice, world.lab, mail_events=[])
    run_and_end(ended, JobState.FAILED)
    requeue(requeued)

    assert told() == []


def test_fail_tells_an_end_that_failed_or_timed_out_but_not_one_that_completed_or_was_cancelled(world, told):
    failed, timed_out, completed, cancelled = (
        submit(world.alice, world.lab, name=name, mail_events=["FAIL"])
        for name in ("failed", "timed-out", "completed", "cancelled")
    )
    run_and_end(failed, JobState.FAILED)
    run_and_end(timed_out, JobState.TIMEOUT)
    run_and_end(completed)
    cancel_job(cancelled, by="admin")

    assert told() == [f"Failed: job {failed.id} (failed)", f"Timeout: job {timed_out.id} (timed-out)"]


def test_requeue_tells_a_preemption_and_time_limit_a_timeout(world, told):
    requeued = submit(world.alice, world.lab, name="requeued", mail_events=["REQUEUE"])
    limited, failed = (submit(world.alice, world.lab, name=n, mail_events=["TIME_LIMIT"]) for n in ("limit", "failed"))
    requeue(requeued)
    run_and_end(limited, JobState.TIMEOUT)
    run_and_end(failed, JobState.FAILED)

    assert told() == [f"Preempted: job {requeued.id} (requeued)", f"Timeout: job {limited.id} (limit)"]


def test_the_portals_own_warnings_stay_the_owners_choice_even_with_none(world, told):
    job = submit(world.alice, world.lab, name="quiet", mail_events=[])
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")
    record_event(job.id, EventKind.IDLE, "its GPUs averaged 1.0% over the last 30 min", {"attempt": 0})

    assert told() == [f"Idle GPUs: job {job.id} (quiet)"]


def test_a_user_without_a_preference_row_gets_the_messages_their_job_asked_for(world, mailoutbox):
    assert not Preference.objects.exists()
    job = submit(world.alice, world.lab, name="train", mail_events=["REQUEUE", "FAIL"])

    requeue(job)  # preempted is not among the defaults; started is
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running again")
    transition(job.id, [JobState.RUNNING], JobState.FAILED, data={"exit_code": 3}, exit_code=3)
    pump(later())

    subjects = sorted(m.subject for m in mailoutbox)
    assert subjects == [f"Failed: job {job.id} (train)", f"Preempted: job {job.id} (train)"]
    assert {tuple(m.to) for m in mailoutbox} == {("alice@example.org",)}


def test_the_owners_channels_carry_a_jobs_messages(world, mailoutbox):
    Preference.objects.create(user=world.alice, events=[], email=False)  # no channel at all
    run_and_end(submit(world.alice, world.lab, mail_events=["ALL"]))

    pump(later())

    assert mailoutbox == []


def array(world, mail_events: list[str] | None, tasks: int = 3) -> list[Job]:
    first = submit_job(
        owner=world.alice,
        account=world.lab,
        qos=None,
        array=parse_array(f"0-{tasks - 1}", max_size=10),
        name="sweep",
        command="true",
        walltime_seconds=60,
        mail_events=mail_events,
    )
    return list(Job.objects.filter(array_job=first).order_by("array_task_id"))


def run_all(tasks: list[Job], **ends: Any) -> None:
    for task in tasks:
        run_and_end(task, ends.get(str(task.array_task_id), JobState.COMPLETED))


def test_an_array_asking_for_begin_and_end_is_told_once_as_it_starts_and_once_as_it_ends(world, told):
    tasks = array(world, ["BEGIN", "END"])
    run_and_end(tasks[0])
    run_and_end(tasks[1])

    assert told() == [f"Started: array {tasks[0].id} (sweep)"]  # its first task's start; no task's end

    run_and_end(tasks[2])
    pump(later(20))

    assert told() == [f"Ended: array {tasks[0].id} (sweep)", f"Started: array {tasks[0].id} (sweep)"]


@pytest.mark.parametrize(("failed_task", "told_end"), [(None, False), ("1", True)], ids=["all completed", "one failed"])
def test_an_array_asking_for_fail_is_told_at_its_end_if_a_task_failed(world, told, failed_task, told_end):
    tasks = array(world, ["FAIL"])
    run_all(tasks, **({failed_task: JobState.FAILED} if failed_task else {}))

    assert told() == ([f"Ended: array {tasks[0].id} (sweep)"] if told_end else [])


def test_array_tasks_tells_each_task_as_a_job_of_its_own(world, told):
    tasks = array(world, ["END", "ARRAY_TASKS"], tasks=2)
    run_all(tasks, **{"1": JobState.FAILED})

    first = tasks[0].id
    assert told() == [f"Completed: job {first}_0 (sweep)", f"Failed: job {first}_1 (sweep)"]  # no start, no summary


def test_an_array_whose_job_chose_nothing_is_still_one_message_at_its_end(world, told):
    tasks = array(world, None)
    run_all(tasks)

    assert told() == [f"Ended: array {tasks[0].id} (sweep)"]
