"""Calibrated start times over the API: a pending job's p50 and p90 starts beside its
latest start, and the backtest of them, which only staff may read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Job, StartBacktest
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_a_pending_job_carries_its_p50_and_p90_starts(world, client_for):
    job = submit(world.alice, world.lab)
    now = timezone.now().replace(microsecond=0)
    Job.objects.filter(pk=job.pk).update(
        estimated_start_at=now + timedelta(hours=4),
        estimated_start_p50_at=now + timedelta(hours=1),
        estimated_start_p90_at=now + timedelta(hours=3),
    )
    body = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()
    p50, p90 = (body[f"estimated_start_{q}_at"] for q in ("p50", "p90"))
    assert p50 < p90 < body["estimated_start_at"]
    assert p50.startswith((now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S"))


def test_the_p50_and_p90_cannot_be_written(world, client_for):
    job = submit(world.alice, world.lab)
    response = client_for(world.alice).patch(
        f"/api/v1/jobs/{job.id}/", {"estimated_start_p50_at": "2026-01-01T00:00:00Z"}, format="json"
    )
    assert response.status_code in (400, 405)
    job.refresh_from_db()
    assert job.estimated_start_p50_at is None


@pytest.fixture
def backtested(world):
    return StartBacktest.objects.create(
        ran_at=timezone.now(),
        days=7,
        jobs=7000,
        judged=800,
        p50_coverage=0.55,
        p90_coverage=0.8,
        p50_error_s=720.0,
        wall_s=12.5,
    )


def test_staff_read_the_latest_backtest_first_with_its_sentence(world, client_for, backtested):
    StartBacktest.objects.create(ran_at=backtested.ran_at - timedelta(hours=6), days=7)
    body = client_for(world.admin).get("/api/v1/start-backtests/").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert [row["id"] for row in rows] == [backtested.id, rows[1]["id"]]
    assert rows[0]["p90_coverage"] == 0.8 and rows[0]["p50_error_s"] == 720.0
    assert rows[0]["summary"].startswith(
        "80% of jobs started before their p90 and 55% before their p50; p50 error 12 min"
    )


@pytest.mark.parametrize("who", ["alice", "bob", "charlie", None])
def test_researchers_coordinators_and_strangers_may_not_read_the_backtest(world, client_for, backtested, who):
    client = client_for(getattr(world, who) if who else None)
    assert client.get("/api/v1/start-backtests/").status_code in (401, 403)
    assert client.get(f"/api/v1/start-backtests/{backtested.id}/").status_code in (401, 403)


def test_nobody_writes_a_backtest_over_the_api(world, client_for):
    assert client_for(world.admin).post("/api/v1/start-backtests/", {"days": 7}, format="json").status_code == 405
