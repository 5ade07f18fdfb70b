"""Telling people what happened to their jobs: through a real SMTP server and a real
HTTP receiver, each fact once per channel (at least once: a retry may repeat it, its key
says so), and a channel that fails never holds up the scheduler."""

from __future__ import annotations

import hashlib
import hmac
import html
import json
from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from notifications import outbox
from notifications.models import Delivery, Event, Preference, Status
from notifications.outbox import backoff, pump
from people.models import Quota
from scheduler.choices import EventKind, JobState
from scheduler.jobs.array_spec import parse_array
from scheduler.jobs.submit import submit_job
from scheduler.jobs.transitions import record_event, transition
from scheduler.jobs.verbs import cancel_job, hold_job
from scheduler.models import Job
from tests.builders import gpu_process, report_processes, submit

pytestmark = pytest.mark.django_db


def later(seconds: float = 10) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def run_and_end(job: Job, exit_code: int = 0) -> None:
    """The transitions a job's life writes (dispatch, then the poll that saw it end)."""
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running on test")
    to = JobState.COMPLETED if exit_code == 0 else JobState.FAILED
    transition(job.id, [JobState.RUNNING], to, data={"exit_code": exit_code}, exit_code=exit_code)


def webhook(user, url: str, fmt: str = "json") -> Preference:
    return Preference.objects.create(
        user=user, events=[e.value for e in Event], email=False, webhook_url=url, webhook_format=fmt
    )


def test_a_job_that_starts_and_fails_is_mailed_to_its_owner_through_smtp(world, smtp):
    job = submit(world.alice, world.lab, name="train")
    run_and_end(job, exit_code=3)

    result = pump(later())

    assert result["sent"] == 2
    subjects = sorted(message["Subject"] for message in smtp.messages())
    assert subjects == [f"Failed: job {job.id} (train)", f"Started: job {job.id} (train)"]
    failed = next(m for m in smtp.messages() if m["Subject"].startswith("Failed"))
    assert failed["To"] == "alice@example.org" and "with exit code 3" in failed.get_payload()
    assert f"/jobs/{job.id}/" in failed.get_payload()
    assert pump(later(20))["sent"] == 0 and len(smtp.messages()) == 2  # once per fact


def test_a_webhook_is_signed_with_the_users_secret_and_carries_the_job(world, receiver):
    pref = webhook(world.alice, receiver.url)
    job = submit(world.alice, world.lab, name="train")
    run_and_end(job)

    pump(later())

    assert len(receiver.received) == 2
    headers, body = receiver.received[-1]
    expected = "sha256=" + hmac.new(pref.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Quartermaster-Signature"] == expected
    document = json.loads(body)
    assert (document["event"], document["id"], document["state"], document["exit_code"]) == (
        "ended",
        job.id,
        "COMPLETED",
        0,
    )
    assert headers["X-Quartermaster-Delivery"] == f"{document['key']}:webhook"


def test_slack_format_sends_text(world, receiver):
    webhook(world.alice, receiver.url, fmt="slack")
    job = submit(world.alice, world.lab, name="train")
    run_and_end(job)
    pump(later())
    assert set(json.loads(receiver.received[0][1])) == {"text"}


def test_a_failing_webhook_is_retried_with_backoff_and_then_delivered(world, receiver):
    webhook(world.alice, receiver.url)
    receiver.answers = [503, 500]
    job = submit(world.alice, world.lab)
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")
    now = later()

    assert pump(now)["retry"] == 1
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == (Status.PENDING, 1, "webhook answered 503")
    assert delivery.next_attempt_at == now + backoff(1)
    assert pump(now + timedelta(seconds=1))["retry"] == 0  # not due yet
    assert pump(now + backoff(1))["retry"] == 1
    assert pump(now + backoff(1) + backoff(2))["sent"] == 1
    assert Delivery.objects.get().status == Status.SENT and len(receiver.received) == 3


def test_a_webhook_that_refuses_is_given_up_at_once_and_the_log_shows_it(world, receiver):
    webhook(world.alice, receiver.url)
    receiver.answers = [404]
    job = submit(world.alice, world.lab)
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")

    assert pump(later())["failed"] == 1

    client = Client()
    client.force_login(world.alice)
    page = client.get("/profile/").content.decode()
    assert "webhook answered 404" in page and "failed (gave up)" in page


def test_mail_to_a_server_that_is_down_waits_and_the_jobs_go_on(world, settings, tick):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 9  # nothing listens
    job = submit(world.alice, world.lab)
    run_and_end(job)

    result = pump(later())

    assert result["retry"] == 2 and Delivery.objects.filter(status=Status.PENDING).count() == 2
    assert Job.objects.get(pk=job.pk).state == JobState.COMPLETED  # nothing waited for the mail
    second = submit(world.alice, world.lab)
    tick()
    assert Job.objects.get(pk=second.pk).state != JobState.PENDING


def test_held_by_an_admin_is_news_held_by_oneself_is_not(world, receiver):
    webhook(world.alice, receiver.url)
    mine, theirs = submit(world.alice, world.lab, name="mine"), submit(world.alice, world.lab, name="theirs")
    hold_job(mine, by="alice")
    hold_job(theirs, by="admin")

    pump(later())

    [(_, body)] = receiver.received
    assert json.loads(body)["subject"] == f"Held: job {theirs.id} (theirs)"


def test_without_preferences_mail_goes_for_the_default_events_only(world, smtp):
    job = submit(world.alice, world.lab)
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")
    transition(job.id, [JobState.RUNNING], JobState.PENDING, event=EventKind.PREEMPTED, message="preempted by 9")
    pump(later())
    assert [m["Subject"].split(":")[0] for m in smtp.messages()] == ["Started"]  # preempted is opt-in


def test_the_idle_rules_flag_reaches_the_owner_once(world, receiver):
    webhook(world.alice, receiver.url)
    job = submit(world.alice, world.lab)
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")
    record_event(job.id, EventKind.IDLE, "its GPUs averaged 1.0% over the last 30 min", {"attempt": 0})

    pump(later())
    pump(later(60))

    [idle] = [json.loads(body) for _, body in receiver.received if json.loads(body)["event"] == "idle"]
    assert idle["subject"] == f"Idle GPUs: job {job.id} ({job.name})" and "averaged 1.0%" in idle["text"]


def test_a_cancel_by_someone_else_is_news_ones_own_is_not(world, receiver):
    webhook(world.alice, receiver.url)
    mine, theirs = submit(world.alice, world.lab, name="mine"), submit(world.alice, world.lab, name="theirs")
    cancel_job(mine, by="alice")
    cancel_job(theirs, by="idle policy")
    pump(later())
    [(_, body)] = receiver.received
    assert json.loads(body)["subject"] == f"Cancelled: job {theirs.id} (theirs)"


def test_an_account_near_its_gpu_quota_tells_its_members_once_a_day(world, receiver):
    webhook(world.alice, receiver.url)
    Quota.objects.create(account=world.lab, max_gpus=10)
    for _ in range(2):
        job = submit(world.bob, world.lab, gpus_per_node=4)
        Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    now = timezone.now()

    pump(now)
    pump(now + timedelta(minutes=1))

    quota = [json.loads(body) for _, body in receiver.received if json.loads(body)["event"] == "quota_near"]
    assert len(quota) == 1 and (quota[0]["used_gpus"], quota[0]["max_gpus"]) == (8.0, 10)


def test_an_estimate_that_moves_a_lot_is_news_a_small_move_is_not(world, receiver, settings):
    webhook(world.alice, receiver.url)
    now = timezone.now()
    job = submit(world.alice, world.lab)
    every = timedelta(seconds=settings.NOTIFY_CONDITIONS_SECONDS)
    Job.objects.filter(pk=job.pk).update(estimated_start_at=now + timedelta(hours=1))
    pump(now)  # the first estimate is only remembered
    Job.objects.filter(pk=job.pk).update(estimated_start_at=now + timedelta(hours=1, minutes=10))
    pump(now + every)
    Job.objects.filter(pk=job.pk).update(estimated_start_at=now + timedelta(hours=3))
    pump(now + every / 2 + every)  # too soon after the last look: not read yet
    assert not [r for r in receiver.received if json.loads(r[1])["event"] == "estimate_moved"]
    pump(now + 2 * every)

    moved = [json.loads(body) for _, body in receiver.received if json.loads(body)["event"] == "estimate_moved"]
    assert len(moved) == 1 and moved[0]["subject"].startswith("Estimate moved later")


def test_events_committed_late_are_not_skipped_by_the_cursor(world, receiver):
    """Events newer than the settle time wait for the next pass instead of being passed."""
    webhook(world.alice, receiver.url)
    job = submit(world.alice, world.lab)
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")
    pump(timezone.now())  # too fresh: left for later
    assert not [r for r in receiver.received if json.loads(r[1])["event"] == "started"]
    pump(later(outbox.SETTLE.total_seconds() + 1))
    assert [r for r in receiver.received if json.loads(r[1])["event"] == "started"]


def test_the_api_reads_and_changes_ones_own_choices_and_lists_ones_own_messages(world, client_for, receiver):
    client = client_for(world.alice)
    assert client.get("/api/v1/notifications/preferences/").json()["events"] == ["started", "ended", "held", "idle"]

    response = client.patch(
        "/api/v1/notifications/preferences/",
        {"events": ["ended", "preempted"], "email": False, "webhook_url": receiver.url},
        format="json",
    )

    assert response.status_code == 200 and response.json()["events"] == ["ended", "preempted"]
    assert response.json()["webhook_secret"] == Preference.objects.get(user=world.alice).webhook_secret
    job = submit(world.alice, world.lab)
    run_and_end(job)
    pump(later())
    rows = client.get("/api/v1/notifications/deliveries/").json()["results"]
    assert [(r["event"], r["channel"], r["status"]) for r in rows] == [("ended", "webhook", "sent")]
    assert client_for(world.bob).get("/api/v1/notifications/deliveries/").json()["results"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"events": ["everything"]}, "events"),
        ({"webhook_url": "not a url"}, "webhook_url"),
        ({"webhook_secret": "mine"}, "webhook_secret"),
        ({"emial": False}, "emial"),
    ],
)
def test_bad_choices_are_a_400_naming_the_field(world, client_for, body, field):
    response = client_for(world.alice).patch("/api/v1/notifications/preferences/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Preference.objects.exists()


def test_by_email_is_refused_through_the_api_while_the_user_has_no_address(world, client_for):
    world.alice.email = ""
    world.alice.save(update_fields=["email"])
    client = client_for(world.alice)

    refused = client.patch("/api/v1/notifications/preferences/", {"email": True}, format="json")
    off = client.patch("/api/v1/notifications/preferences/", {"email": False}, format="json")

    assert refused.status_code == 400 and "You have no e-mail address" in refused.json()["email"][0]
    assert off.status_code == 200 and Preference.objects.get(user=world.alice).email is False
    client.patch("/api/v1/me/", {"email": "alice@lab.example"}, format="json")
    assert client.patch("/api/v1/notifications/preferences/", {"email": True}, format="json").status_code == 200


def test_a_job_array_is_told_once_when_its_last_task_ends(world, receiver):
    webhook(world.alice, receiver.url)
    first = submit_job(
        owner=world.alice,
        account=world.lab,
        qos=None,
        array=parse_array("0-2", max_size=10),
        name="sweep",
        command="true",
        walltime_seconds=60,
    )
    tasks = list(Job.objects.filter(array_job=first).order_by("array_task_id"))
    run_and_end(tasks[0])
    run_and_end(tasks[1], exit_code=1)
    pump(later())
    assert receiver.received == []  # two of three ended: nothing yet, and never one per task

    run_and_end(tasks[2])
    pump(later(20))
    pump(later(40))

    [(_, body)] = receiver.received
    told = json.loads(body)
    assert told["subject"] == f"Ended: array {first.id} (sweep)"
    assert "every task of your array" in told["text"].lower() and "2 completed, 1 failed" in told["text"]


def test_the_demos_mail_to_a_demo_address_lands_in_a_file_and_the_profile_says_where(world, settings, tmp_path):
    """What ``run_demo`` sets up: the file backend, and users at the never-existing demo.invalid."""
    from quartermaster.management.commands.run_demo import demo_environment

    settings.EMAIL_BACKEND = demo_environment({})["EMAIL_BACKEND"]
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    world.alice.email = "alice@demo.invalid"
    world.alice.save(update_fields=["email"])
    run_and_end(submit(world.alice, world.lab, name="train"))

    assert pump(later())["sent"] == 2

    written = "".join(path.read_text() for path in (tmp_path / "mail").iterdir())
    assert written.count("To: alice@demo.invalid") == 2 and "Started: job" in written
    client = Client()
    client.force_login(world.alice)
    page = html.unescape(client.get("/profile/").content.decode())
    assert f"This site's e-mail is written to files in {tmp_path / 'mail'}, not sent to inboxes." in page


def test_staff_are_told_of_each_gpu_process_finding_once(world, receiver):
    from monitoring.audit import audit_processes

    webhook(world.admin, receiver.url)
    webhook(world.alice, receiver.url)
    now = timezone.now()
    for seconds in (0, 10, 20):  # three samples, three audit passes: one finding
        at = now + timedelta(seconds=seconds)
        report_processes("h100-01", 2, [gpu_process(999, uid=4000, user="mallory", command="xmrig")], at)
        audit_processes(at)
        pump(at + timedelta(seconds=1))

    told = [json.loads(body) for _, body in receiver.received]
    assert [(m["event"], m["node"], m["gpu"], m["rule"], m["pid"], m["user"]) for m in told] == [
        ("gpu_process", "h100-01", 2, "foreign", 999, "mallory")
    ]
    assert told[0]["subject"] == "GPU process: foreign process on GPU 2 of h100-01"
    assert "pid 999 (xmrig) of mallory (uid 4000)" in told[0]["text"]
    assert Delivery.objects.filter(user=world.alice).count() == 0  # staff only


def test_staff_who_chose_their_events_before_the_site_notices_are_told_of_them_too(world):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("notifications.migrations.0005_staff_events")
    Preference.objects.create(user=world.admin, events=["started"])
    Preference.objects.create(user=world.alice, events=["started"])
    migration.tell_staff_of_the_site(apps, None)
    assert Preference.objects.get(user=world.admin).events == ["started", "starving", "gpu_process"]
    assert Preference.objects.get(user=world.alice).events == ["started"]


def test_staff_who_made_no_choice_are_mailed_gpu_process_findings(world):
    from monitoring.audit import audit_processes

    now = timezone.now()
    report_processes("h100-01", 2, [gpu_process(999, uid=4000)], now)
    audit_processes(now)
    outbox.read_findings(now)
    assert list(Delivery.objects.values_list("user__username", "channel", "event")) == [
        ("admin", "email", "gpu_process")
    ]
