"""A preview of an account change end to end through Celery on Redis: asked for over the
API, replayed by a real worker process on the test database, read back by polling."""

from __future__ import annotations

import sys

import pytest
from rest_framework.test import APIClient

from quartermaster.celery import app as celery_app
from scheduler.models import Simulation
from tests.conftest import redis_url
from tests.e2e.conftest import child_env
from tests.scheduler.test_previews import history
from tests.scheduler.tick.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_worker_replays_a_preview_asked_for_over_the_api(world, spawn, settings):
    """The API sends the task as the portal does (its default queue, on the site's Redis),
    emptied first of anything an earlier run left there."""
    settings.SCHEDULER_DISPATCH = "celery"
    celery_app.control.purge()
    worker = [sys.executable, "-m", "celery", "-A", "quartermaster", "worker", "--loglevel=INFO", "--concurrency=1"]
    env = child_env(
        CELERY_BROKER_URL=redis_url(), CELERY_QUEUE=settings.CELERY_TASK_DEFAULT_QUEUE, SCHEDULER_DISPATCH="celery"
    )
    spawn([*worker, "--pool=solo", "--without-gossip", "--without-mingle"], env)
    history(world)
    client = APIClient()
    client.force_authenticate(world.admin)

    response = client.post(f"/api/v1/accounts/{world.other.pk}/preview/", {"days": 7, "shares": 50}, format="json")

    assert response.status_code == 202 and response.json()["state"] == "queued"
    done = wait_for(
        lambda: Simulation.objects.filter(pk=response.json()["id"], state__in=["done", "failed"]).first(),
        timeout=90,
        what="the worker to run the preview",
    )
    assert done is not None and done.result is not None
    assert (done.state, done.progress, done.error) == ("done", 1.0, "")
    rows = {row["account"]: row for row in done.result["rows"]}
    assert rows["other"]["proposed"]["avg_wait_s"] < rows["other"]["today"]["avg_wait_s"]
