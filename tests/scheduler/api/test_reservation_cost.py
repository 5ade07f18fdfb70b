"""``POST /api/v1/reservations/preview-cost/`` (and ``.../<id>/preview-cost/``): what a
reservation or maintenance window would cost the queue before it is made or changed:
the jobs it delays, the running jobs it overlaps, the GPU-hours displaced, and the least
displacing start in a range. Staff only; nothing is saved; a bad body is a 400 naming
the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from scheduler.models import Reservation
from tests.builders import queue_behind_a_running_job

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
URL = "/api/v1/reservations/preview-cost/"


def at(hours: float) -> str:
    return (NOW + timedelta(hours=hours)).isoformat()


def body(**changes: Any) -> dict[str, Any]:
    return {"name": "fw", "kind": "maintenance", "nodes": ["h100-01"], "start_at": at(1), "end_at": at(5)} | changes


@pytest.fixture
def queue(world):
    with time_machine.travel(NOW, tick=False):
        yield queue_behind_a_running_job(world, NOW)


def test_staff_see_the_delayed_job_the_running_job_and_the_gpu_hours_displaced(world, queue, client_for):
    response = client_for(world.admin).post(URL, body(), format="json")
    assert response.status_code == 200, response.content
    cost = response.json()["cost"]
    (delayed,) = cost["delayed_jobs"]
    assert (delayed["job_id"], delayed["delay_seconds"], delayed["gpu_hours"]) == (queue["waiting"].id, 3 * 3600, 24)
    assert [r["job_id"] for r in cost["running_jobs"]] == [queue["running"].id]
    assert (cost["gpu_hours_displaced"], cost["queued_gpu_hours"], cost["running_gpu_hours"]) == (32, 24, 8)
    assert response.json()["suggestion"] is None
    assert not Reservation.objects.exists()


def test_a_range_brings_the_least_displacing_start(world, queue, client_for):
    response = client_for(world.admin).post(URL, body(suggest_from=at(1), suggest_until=at(8)), format="json")
    suggestion = response.json()["suggestion"]
    assert suggestion["best"]["start_at"] == "2026-12-07T16:00:00Z" and suggestion["best"]["gpu_hours_displaced"] == 0
    assert suggestion["tried"] == 13  # every quarter hour from +1 h, up to the first that displaces nothing


def test_a_change_is_measured_against_the_world_without_the_saved_window(world, queue, client_for):
    client = client_for(world.admin)
    pk = client.post("/api/v1/reservations/", body(), format="json").json()["id"]
    response = client.post(f"/api/v1/reservations/{pk}/preview-cost/", {"end_at": at(3)}, format="json")
    assert response.status_code == 200, response.content
    # Shortened to +1 h..+3 h: the waiting job runs from +3 h instead of +2 h.
    assert [d["delay_seconds"] for d in response.json()["cost"]["delayed_jobs"]] == [3600]
    assert Reservation.objects.get().end_at == NOW + timedelta(hours=5)


def test_researchers_may_not_preview_a_windows_cost(world, queue, client_for):
    assert client_for(world.alice).post(URL, body(), format="json").status_code == 403


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"end_at": at(0.5)}, "end_at"),
        ({"suggest_from": at(3), "suggest_until": at(2)}, "suggest_until"),
        ({"suggest_until": at(2)}, "suggest_from"),
        ({"nodes": ["nowhere"]}, "nodes"),
        ({"suggest_every": 5}, "suggest_every"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(world, queue, client_for, changes, field):
    response = client_for(world.admin).post(URL, body(**changes), format="json")
    assert response.status_code == 400 and field in response.json(), response.content
