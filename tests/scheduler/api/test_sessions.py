"""``/api/v1/apps/`` and ``/api/v1/sessions/``: launching through the API with a 400 by
field, who sees which session (alice hers, bob coordinating her account too but without
Connect, charlie nothing of hers), Delete cancelling the job, staff defining apps, and
a session's secret in no answer."""

from __future__ import annotations

from typing import Any

import pytest

from people.models import AuditEntry
from scheduler.choices import JobState
from scheduler.models import InteractiveApp, InteractiveSession, Job
from tests.builders import launch, start

pytestmark = pytest.mark.django_db
SESSIONS = "/api/v1/sessions/"
APPS = "/api/v1/apps/"


def listed(client, url: str) -> list[dict]:
    """A list's rows (its first page)."""
    return client.get(url).json()["results"]


def test_alice_launches_a_session_and_reads_it_back(world, client_for):
    client = client_for(world.alice)

    response = client.post(SESSIONS, {"app": "jupyterlab", "gpus": 2, "walltime_seconds": 3600}, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    job = Job.objects.get(pk=body["job"])
    assert (body["app"], body["phase"], body["state"], body["connect_url"]) == ("jupyterlab", "queued", "PENDING", None)
    assert (job.gpus_per_node, job.walltime_seconds, job.owner) == (2, 3600, world.alice)
    assert client.get(f"{SESSIONS}{job.id}/").json()["phase"] == "queued"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"app": "tensorboard"}, "values", id="an app field left out"),
        pytest.param({"app": "tensorboard", "values": {"logdir": "/etc"}}, "values", id="a path not the user's"),
        pytest.param({"app": "nope"}, "app", id="no such app"),
        pytest.param({"app": "jupyterlab", "gpus": 64}, "gpus", id="more GPUs than a node has"),
        pytest.param({"app": "jupyterlab", "gpus": -1}, "gpus", id="negative GPUs"),
        pytest.param({"app": "jupyterlab", "cpus": "lots"}, "cpus", id="CPUs that are no number"),
        pytest.param({"app": "jupyterlab", "account": "other"}, "account", id="an account not hers"),
        pytest.param({"app": "jupyterlab", "walltime_seconds": 0}, "walltime_seconds", id="no walltime"),
        pytest.param({"app": "jupyterlab", "host": "10.0.0.1"}, "host", id="a field a launch does not have"),
    ],
)
def test_a_refused_launch_is_a_400_naming_the_field(world, client_for, body, field):
    response = client_for(world.alice).post(SESSIONS, body, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Job.objects.exists()


def test_a_field_of_the_app_is_named_inside_values(world, client_for):
    body = {"app": "tensorboard", "values": {"logdir": "runs"}}

    problems = client_for(world.alice).post(SESSIONS, body, format="json").json()

    assert "absolute path" in problems["values"]["logdir"][0]


def test_each_sees_the_sessions_they_may_see_and_only_the_owner_gets_connect(world, client_for):
    session = launch(world.alice, "jupyterlab")
    start(session.job, session.job.submitted_at)
    InteractiveSession.objects.filter(pk=session.pk).update(ready_at=session.job.submitted_at, host="h", port=20001)

    mine = listed(client_for(world.alice), SESSIONS)
    coordinated = listed(client_for(world.bob), SESSIONS)

    assert [s["connect_url"] for s in mine] == [f"/sessions/{session.job_id}/lab"]
    assert [(s["job"], s["connect_url"]) for s in coordinated] == [(session.job_id, None)]
    assert listed(client_for(world.charlie), SESSIONS) == []
    assert listed(client_for(world.dora), SESSIONS) == []
    assert client_for(world.charlie).get(f"{SESSIONS}{session.job_id}/").status_code == 404
    assert client_for(None).get(SESSIONS).status_code in (401, 403)


def test_delete_cancels_the_session_s_job_and_charlie_cannot(world, client_for):
    session = launch(world.alice, "jupyterlab")

    assert client_for(world.charlie).delete(f"{SESSIONS}{session.job_id}/").status_code == 404
    assert client_for(world.alice).delete(f"{SESSIONS}{session.job_id}/").status_code == 204

    assert Job.objects.get(pk=session.job_id).state == JobState.CANCELLED
    assert client_for(world.alice).delete(f"{SESSIONS}{session.job_id}/").status_code == 409


def test_no_answer_holds_the_secret_host_or_port(world, client_for):
    session = launch(world.alice, "jupyterlab")
    start(session.job, session.job.submitted_at)
    InteractiveSession.objects.filter(pk=session.pk).update(
        ready_at=session.job.submitted_at, host="node-secret-host", port=23456
    )
    client = client_for(world.alice)

    answers = [
        client.get(SESSIONS).content,
        client.get(f"{SESSIONS}{session.job_id}/").content,
        client.get(f"/api/v1/jobs/{session.job_id}/").content,
        client.get("/api/v1/jobs/").content,
        client.get(f"/api/v1/jobs/{session.job_id}/events/").content,
    ]

    for answer in answers:
        assert session.secret.encode() not in answer
        assert b"node-secret-host" not in answer and b"23456" not in answer


def test_a_job_s_own_env_may_not_set_the_session_secret(world, client_for):
    body = {"command": "true", "walltime_seconds": 60, "env": {"QM_SESSION_SECRET": "mine"}}

    response = client_for(world.alice).post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 400 and "env" in response.json()


def test_researchers_list_the_apps_offered_and_staff_every_app(world, client_for):
    InteractiveApp.objects.filter(slug="tensorboard").update(enabled=False)

    offered = {app["slug"] for app in listed(client_for(world.alice), APPS)}
    every = {app["slug"] for app in listed(client_for(world.admin), APPS)}

    assert offered == {"jupyterlab", "web-server"}
    assert every == {"jupyterlab", "tensorboard", "web-server"}
    assert client_for(world.alice).post(APPS, {}, format="json").status_code == 403


def test_staff_add_an_app_audited_and_an_unknown_placeholder_is_refused(world, client_for):
    client = client_for(world.admin)
    app: dict[str, Any] = {
        "slug": "code",
        "name": "VS Code",
        "command": "code-server --bind-addr 0.0.0.0:{port} {folder}",
    }

    refused = client.post(APPS, app, format="json")
    app["form_fields"] = [{"name": "folder", "label": "Folder", "kind": "path"}]
    made = client.post(APPS, {**app, "clusters": ["test"], "secret_via": "none"}, format="json")

    assert refused.status_code == 400 and "{folder}" in refused.json()["command"][0]
    assert made.status_code == 201, made.json()
    assert made.json()["clusters"] == ["test"]
    assert AuditEntry.objects.filter(action="create", target_repr="VS Code").exists()
    changed = client.patch(f"{APPS}{made.json()['id']}/", {"enabled": False}, format="json")
    assert changed.status_code == 200 and not InteractiveApp.objects.get(slug="code").enabled


def test_an_app_with_sessions_is_disabled_not_deleted(world, client_for):
    launch(world.alice, "jupyterlab")
    app = InteractiveApp.objects.get(slug="jupyterlab")

    assert client_for(world.admin).delete(f"{APPS}{app.pk}/").status_code == 409
    unused = InteractiveApp.objects.get(slug="tensorboard")
    assert client_for(world.admin).delete(f"{APPS}{unused.pk}/").status_code == 204
