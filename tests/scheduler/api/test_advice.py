"""Right-sizing advice in the API: for the shape you describe and for a job's, always of
your own jobs; nobody else reads it, not even who may see the job."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.scheduler.test_advice import crowded_history, measured_history

pytestmark = pytest.mark.django_db

EIGHT_FOR_HALF_A_DAY = {"gpus": 8, "walltime_seconds": 12 * 3600}


@pytest.fixture(autouse=True)
def empty_cache():  # type: ignore[no-untyped-def]
    cache.clear()
    yield
    cache.clear()


def test_you_read_the_advice_for_a_shape_you_describe(world, client_for, django_capture_on_commit_callbacks):
    crowded_history(world)
    client = client_for(world.alice)
    with django_capture_on_commit_callbacks(execute=True):  # the task, inline after commit
        first = client.get("/api/v1/advice/", EIGHT_FOR_HALF_A_DAY).json()["advice"]
    assert first["pending"] and first["started_sooner_seconds"] is None and first["suggested_gpus"] == 2
    response = client.get("/api/v1/advice/", EIGHT_FOR_HALF_A_DAY)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["advice"]["pending"] is False
    advice = body["advice"]
    assert (advice["jobs"], advice["gpus_used"], advice["suggested_gpus"]) == (12, 2, 2)
    assert advice["suggested_walltime_seconds"] == 4500 and advice["started_sooner_seconds"] > 9 * 3600
    assert advice["words"].startswith("Your last 12 jobs of this shape used 8% of their walltime and 2 of 8 GPUs")
    assert body["min_jobs"] == 10


def test_a_jobs_advice_is_for_its_owner(world, client_for):
    measured_history(world)
    job = world.alice.jobs.first()
    mine = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/advice/")
    assert mine.status_code == 200 and mine.json()["advice"]["jobs"] == 12


def test_bob_never_sees_alices_advice(world, client_for):
    """Bob coordinates alice's account and sees her jobs, but advice speaks of hers alone;
    asked for the same shape, he reads his own (none); charlie does not see the job."""
    crowded_history(world)
    job = world.alice.jobs.first()
    bob = client_for(world.bob)
    refused = bob.get(f"/api/v1/jobs/{job.id}/advice/")
    assert refused.status_code == 403 and "owner" in refused.json()["detail"]
    assert bob.get(f"/api/v1/jobs/{job.id}/").status_code == 200  # the job itself he may see
    assert bob.get("/api/v1/advice/", EIGHT_FOR_HALF_A_DAY).json()["advice"] is None
    assert client_for(world.charlie).get(f"/api/v1/jobs/{job.id}/advice/").status_code == 404
    assert client_for(world.admin).get(f"/api/v1/jobs/{job.id}/advice/").status_code == 403


def test_too_few_jobs_of_the_shape_give_no_advice(world, client_for, settings):
    settings.ADVICE_MIN_JOBS = 13
    crowded_history(world)
    body = client_for(world.alice).get("/api/v1/advice/", EIGHT_FOR_HALF_A_DAY).json()
    assert body == {"advice": None, "min_jobs": 13}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"walltime_seconds": 3600}, "gpus"),
        ({"gpus": 0, "walltime_seconds": 3600}, "gpus"),
        ({"gpus": 1, "walltime_seconds": "an hour"}, "walltime_seconds"),
        ({"gpus": 1, "walltime_seconds": 3600, "cluster": "nowhere"}, "cluster"),
        ({"gpus": 1, "walltime_seconds": 3600, "gpu": 2}, "gpu"),
    ],
    ids=["no GPUs", "zero GPUs", "walltime not a number", "unknown cluster", "unknown field"],
)
def test_a_bad_query_is_a_400_naming_the_field(world, client_for, query, field):
    response = client_for(world.alice).get("/api/v1/advice/", query)
    assert response.status_code == 400 and field in response.json(), response.json()


def test_advice_needs_a_sign_in(world, client_for):
    assert client_for(None).get("/api/v1/advice/", EIGHT_FOR_HALF_A_DAY).status_code in (401, 403)
