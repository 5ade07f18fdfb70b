"""The interactive apps pages: /interactive/ lists the apps and one's own session cards
(queued with its estimate and why it waits -> starting -> running with Connect ->
ended with why), an app's launch form launches with errors by field, Delete cancels,
and no page shows a session's secret; staff define apps in /manage/apps/."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from people.models import AuditEntry
from scheduler.backends.base import PollResult, RemoteState
from scheduler.choices import JobState
from scheduler.jobs.remote import backend_for
from scheduler.jobs.transitions import transition
from scheduler.models import InteractiveApp, InteractiveSession, Job
from scheduler.sessions.script import READY_MARKER
from tests.builders import launch, start

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def card(client: Client, session) -> str:
    response = client.get(f"/interactive/sessions/{session.job_id}/card/")
    assert response.status_code == 200
    return response.content.decode()


LAUNCH = {"gpus": "1", "cpus": "2", "memory_mib": "0", "walltime": "2h", "account": ""}


def test_the_page_lists_the_apps_offered_and_the_navigation_links_it(world):
    InteractiveApp.objects.filter(slug="tensorboard").update(enabled=False)

    page = logged_in(world.alice).get("/interactive/").content.decode()

    assert 'href="/interactive/"' in page and "Interactive apps" in page
    assert 'href="/interactive/jupyterlab/"' in page and 'href="/interactive/web-server/"' in page
    assert "/interactive/tensorboard/" not in page
    assert logged_in(world.alice).get("/interactive/tensorboard/").status_code == 404


def test_alice_launches_from_the_form_and_sees_her_queued_card(world):
    client = logged_in(world.alice)
    assert client.get("/interactive/jupyterlab/").status_code == 200

    response = client.post("/interactive/jupyterlab/", {**LAUNCH, "gpus": "2"})

    session = InteractiveSession.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/interactive/#session-{session.job_id}"
    assert (session.job.gpus_per_node, session.job.walltime_seconds) == (2, 7200)
    page = client.get("/interactive/").content.decode()
    assert f'id="session-{session.job_id}"' in page and "Queued" in page
    assert "The scheduler has not looked at it yet." in page


def test_a_queued_card_says_when_it_starts_and_why_it_waits(world):
    session = launch(world.alice, "jupyterlab")
    soon = timezone.now() + timedelta(minutes=40)
    blockers = [{"code": "Resources", "message": "every H100 is busy", "evidence": {}}]
    Job.objects.filter(pk=session.job_id).update(
        estimated_start_at=soon, pending_reason="Resources", pending_blockers=blockers
    )

    shown = card(logged_in(world.alice), session)

    assert "Starts in about 40 min" in shown and "every H100 is busy" in shown


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        pytest.param({"logdir": ""}, "logdir", "required", id="the app's field left empty"),
        pytest.param({"logdir": "/etc"}, "logdir", "/home/alice", id="the app's field refused by the launch"),
        pytest.param({"logdir": "/home/alice/runs", "gpus": "64"}, "gpus", "", id="admission's word on the GPUs"),
        pytest.param({"logdir": "/home/alice/runs", "walltime": "soon"}, "walltime", "90m", id="a walltime unread"),
        pytest.param({"logdir": "/home/alice/runs", "cpus": "many"}, "cpus", "CPUs", id="CPUs unread"),
    ],
)
def test_a_refused_launch_shows_the_error_by_its_field(world, values, field, words):
    response = logged_in(world.alice).post("/interactive/tensorboard/", {**LAUNCH, **values})

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and words in " ".join(errors[field])
    assert not Job.objects.exists()


def test_the_card_turns_running_with_connect_once_the_server_answers(world, monkeypatch):
    session = launch(world.alice, "jupyterlab")
    Job.objects.filter(pk=session.job_id).update(cluster=world.cluster)
    start(session.job, timezone.now() - timedelta(minutes=10))
    client = logged_in(world.alice)
    assert "waiting for the server to answer" in card(client, session)

    backend = type(backend_for(world.cluster))
    monkeypatch.setattr(backend, "read_log", lambda self, key, max_bytes=0: f"{READY_MARKER} port=20002\n")
    shown = card(client, session)

    assert f'href="/sessions/{session.job_id}/lab"' in shown and "Connect" in shown
    assert "left" in shown  # 4 h walltime, 10 min used
    assert InteractiveSession.objects.get(pk=session.pk).port == 20002


def test_an_ended_card_says_why(world):
    session = launch(world.alice, "jupyterlab")
    start(session.job, timezone.now() - timedelta(hours=4))
    transition(session.job_id, [JobState.RUNNING], JobState.TIMEOUT, ended_at=timezone.now())

    shown = card(logged_in(world.alice), session)

    assert "it reached its walltime (4 h)" in shown and "Connect" not in shown


def test_delete_cancels_and_no_one_else_s_card_or_delete_is_reachable(world):
    session = launch(world.alice, "jupyterlab")

    for other in (world.bob, world.charlie, world.admin):
        assert logged_in(other).get(f"/interactive/sessions/{session.job_id}/card/").status_code == 404
        assert logged_in(other).post(f"/interactive/sessions/{session.job_id}/delete/").status_code == 404
    response = logged_in(world.alice).post(f"/interactive/sessions/{session.job_id}/delete/")

    assert response.status_code == 302
    assert Job.objects.get(pk=session.job_id).state == JobState.CANCELLED


def test_no_page_shows_the_secret(world, monkeypatch):
    session = launch(world.alice, "jupyterlab")
    Job.objects.filter(pk=session.job_id).update(cluster=world.cluster)
    start(session.job, timezone.now())
    running = {session.job.external_id: PollResult(session.job.external_id, RemoteState.RUNNING)}
    backend = type(backend_for(world.cluster))
    monkeypatch.setattr(backend, "poll", lambda self, keys: running)
    monkeypatch.setattr(backend, "read_log", lambda self, key, max_bytes=0: f"{READY_MARKER} port=20003\n")
    client = logged_in(world.alice)

    pages = [
        client.get("/interactive/"),
        client.get(f"/interactive/sessions/{session.job_id}/card/"),
        client.get(f"/jobs/{session.job_id}/"),
        client.get(f"/jobs/{session.job_id}/log/"),
        client.get("/jobs/"),
    ]

    for page in pages:
        assert page.status_code == 200
        assert session.secret not in page.content.decode()


def test_staff_add_an_app_in_the_pages_and_a_bad_placeholder_is_a_form_error(world):
    client = logged_in(world.admin)
    form = {
        "slug": "code",
        "name": "VS Code",
        "command": "code-server --bind-addr 0.0.0.0:{port} {folder}",
        "secret_via": "none",
        "default_gpus": "0",
        "default_cpus": "1",
        "default_memory_mib": "0",
        "default_walltime": "2h",
        "enabled": "on",
    }
    assert logged_in(world.alice).get("/manage/apps/").status_code == 403

    refused = client.post("/manage/apps/new/", form)
    made = client.post(
        "/manage/apps/new/", {**form, "form_fields": '[{"name": "folder", "label": "Folder", "kind": "path"}]'}
    )

    assert "{folder}" in " ".join(refused.context["form"].errors["command"])
    assert made.status_code == 302
    app = InteractiveApp.objects.get(slug="code")
    assert app.form_fields[0]["name"] == "folder"
    assert AuditEntry.objects.filter(action="create", target_repr="VS Code").exists()
    assert "VS Code" in client.get("/manage/apps/").content.decode()
    assert client.get(f"/manage/apps/{app.pk}/").status_code == 200
    disabled = {**form, "form_fields": '[{"name": "folder", "kind": "path"}]'}
    disabled.pop("enabled")
    assert client.post(f"/manage/apps/{app.pk}/", disabled).status_code == 302
    assert not InteractiveApp.objects.get(slug="code").enabled
    assert "/interactive/code/" not in logged_in(world.alice).get("/interactive/").content.decode()
