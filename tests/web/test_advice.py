"""Right-sizing advice on the pages: the job page's box and the submit form's estimate,
each for its owner's own jobs only."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from tests.scheduler.test_advice import crowded_history, measured_history

pytestmark = pytest.mark.django_db

SAID = "Your last 12 jobs of this shape used 8% of their walltime and 2 of 8 GPUs; asking 1 h 15 min and 2 GPUs"


@pytest.fixture(autouse=True)
def empty_cache():  # type: ignore[no-untyped-def]
    cache.clear()
    yield
    cache.clear()


def logged_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_the_job_page_tells_its_owner_what_asking_less_would_have_bought(world):
    measured_history(world)
    job = world.alice.jobs.first()
    html = logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert "Right-sizing" in html and SAID in html and "sooner on average" in html
    assert "<th>GPUs busy</th><td>2 " in html  # its own efficiency, which the advice reads


def test_bob_sees_alices_job_but_not_her_advice(world):
    measured_history(world)
    job = world.alice.jobs.first()
    response = logged_in(world.bob).get(f"/jobs/{job.id}/")
    assert response.status_code == 200
    assert "Right-sizing" not in response.content.decode()


def test_no_box_on_too_few_jobs_of_the_shape(world, settings):
    settings.ADVICE_MIN_JOBS = 13
    crowded_history(world)
    job = world.alice.jobs.first()
    assert "Right-sizing" not in logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()


def test_the_submit_forms_estimate_gives_the_advice_for_the_shape_typed(world):
    measured_history(world)
    form = {
        "name": "train",
        "account": "lab",
        "gpus_per_node": "8",
        "walltime_seconds": "12h",
        "command": "python train.py",
        "action": "estimate",
    }
    alice = logged_in(world.alice)
    assert SAID in alice.post("/jobs/new/", form).content.decode()
    other_shape = alice.post("/jobs/new/", {**form, "gpus_per_node": "4"}).content.decode()
    assert "Estimate" in other_shape and 'id="advice"' not in other_shape


def test_while_the_replay_runs_the_page_gives_the_suggestion_and_says_so(world):
    crowded_history(world)  # nothing measured yet; the task is asked after commit
    job = world.alice.jobs.first()
    html = logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert "asking 1 h 15 min and 2 GPUs might have started them sooner" in html and "under way" in html
