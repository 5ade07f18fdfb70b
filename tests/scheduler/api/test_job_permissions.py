"""Who can list, see and act on which jobs, for every job endpoint.

alice owns the job; bob coordinates her account; dora is a plain member of it;
charlie is in another account; admin is staff.
"""

from __future__ import annotations

import pytest

from scheduler.choices import JobState
from tests.builders import submit

pytestmark = pytest.mark.django_db

SEES_ALICES_JOB = {"alice": True, "bob": True, "dora": False, "charlie": False, "admin": True}


@pytest.fixture
def alices_job(world):
    return submit(world.alice, world.lab, name="alices-train")


@pytest.mark.parametrize("who,sees", SEES_ALICES_JOB.items())
def test_list_shows_a_job_only_to_those_allowed(world, client_for, alices_job, who, sees):
    response = client_for(getattr(world, who)).get("/api/v1/jobs/")
    assert response.status_code == 200
    assert (alices_job.id in [j["id"] for j in response.json()["results"]]) is sees


@pytest.mark.parametrize("who,sees", SEES_ALICES_JOB.items())
@pytest.mark.parametrize("suffix", ["", "events/", "log/"])
def test_detail_endpoints_answer_404_to_outsiders(world, client_for, alices_job, who, sees, suffix):
    response = client_for(getattr(world, who)).get(f"/api/v1/jobs/{alices_job.id}/{suffix}")
    assert response.status_code == (200 if sees else 404)


@pytest.mark.parametrize("who,allowed", SEES_ALICES_JOB.items())
def test_cancel_only_by_owner_coordinator_or_staff(world, client_for, alices_job, who, allowed):
    response = client_for(getattr(world, who)).post(f"/api/v1/jobs/{alices_job.id}/cancel/")
    alices_job.refresh_from_db()
    if allowed:
        assert response.status_code == 200
        assert response.json()["state"] == alices_job.state == JobState.CANCELLED
    else:
        assert response.status_code == 404
        assert alices_job.state == JobState.PENDING


@pytest.mark.parametrize("who,allowed", [("alice", True), ("bob", True), ("dora", False), ("charlie", False)])
def test_hold_and_release(world, client_for, alices_job, who, allowed):
    client = client_for(getattr(world, who))
    held = client.post(f"/api/v1/jobs/{alices_job.id}/hold/")
    if not allowed:
        assert held.status_code == 404
        return
    assert held.json()["state"] == JobState.HELD
    assert held.json()["pending_reason"] == "JobHeldUser"
    released = client.post(f"/api/v1/jobs/{alices_job.id}/release/")
    assert released.json()["state"] == JobState.PENDING


def test_verbs_on_a_job_in_the_wrong_state_answer_409(world, client_for, alices_job):
    client = client_for(world.alice)
    assert client.post(f"/api/v1/jobs/{alices_job.id}/release/").status_code == 409
    client.post(f"/api/v1/jobs/{alices_job.id}/cancel/")
    response = client.post(f"/api/v1/jobs/{alices_job.id}/cancel/")
    assert response.status_code == 409
    assert "CANCELLED" in response.json()["detail"]


def test_requeue_of_an_ended_job_starts_a_new_attempt(world, client_for, alices_job):
    client = client_for(world.alice)
    client.post(f"/api/v1/jobs/{alices_job.id}/cancel/")
    body = client.post(f"/api/v1/jobs/{alices_job.id}/requeue/").json()
    assert (body["state"], body["attempt"], body["ended_at"]) == (JobState.PENDING, 1, None)
    kinds = [e["kind"] for e in client.get(f"/api/v1/jobs/{alices_job.id}/events/").json()["results"]]
    assert kinds == ["submitted", "cancelled", "requeued"]


def test_filters_by_state_account_and_owner(world, client_for, alices_job):
    submit(world.bob, world.lab, name="bobs")
    client = client_for(world.admin)
    names = lambda query: sorted(j["name"] for j in client.get(f"/api/v1/jobs/?{query}").json()["results"])  # noqa: E731
    assert names("owner=alice") == ["alices-train"]
    assert names("account=lab") == ["alices-train", "bobs"]
    assert names("state=PENDING&state=RUNNING") == ["alices-train", "bobs"]
    assert names("state=COMPLETED") == []
    assert names("ordering=name") == ["alices-train", "bobs"]


def test_anonymous_gets_401_or_403(db, client_for):
    assert client_for(None).get("/api/v1/jobs/").status_code in (401, 403)


def test_list_does_not_grow_queries_with_rows(world, client_for, django_assert_max_num_queries):
    for i in range(30):
        submit(world.alice, world.lab, name=f"j{i}")
    client = client_for(world.alice)
    with django_assert_max_num_queries(8):
        assert len(client.get("/api/v1/jobs/").json()["results"]) == 30
