"""GET /metrics: what a site's Prometheus scrapes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduler.choices import EventKind, NodeState
from scheduler.jobs.transitions import record_event
from scheduler.models import JobEvent, Node
from tests.builders import finished, submit

pytestmark = pytest.mark.django_db


def scrape(client, **headers):
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


@pytest.fixture(autouse=True)
def _scrapeable(settings):  # type: ignore[no-untyped-def]
    """Tests run with DEBUG off: open /metrics as a site on a private network would."""
    settings.MONITORING_METRICS_PUBLIC = True


def test_queue_gpus_and_tick_are_exported(world, client, tick):
    Node.objects.exclude(name="h100-01").update(state=NodeState.DRAIN)
    running = submit(world.alice, world.lab, gpus_per_node=2, gpu_model="H100-80GB")
    tick()
    submit(world.alice, world.lab, gpus_per_node=8)
    submit(world.charlie, world.other, gpus_per_node=8, gpu_model="L4")
    record_event(running.id, EventKind.DISPATCH_RETRY, "backend down")
    figures = scrape(client)
    assert figures[("quartermaster_jobs_running", (("account", "lab"), ("gpu_model", "H100-80GB")))] == 1
    assert figures[("quartermaster_jobs_pending", (("account", "lab"), ("gpu_model", "any")))] == 1
    assert figures[("quartermaster_jobs_pending", (("account", "other"), ("gpu_model", "L4")))] == 1
    assert figures[("quartermaster_gpus_allocated", (("gpu_model", "H100-80GB"),))] == 2
    assert figures[("quartermaster_gpus_free", (("gpu_model", "H100-80GB"),))] == 6  # h100-02 is drained
    assert figures[("quartermaster_gpus_free", (("gpu_model", "L4"),))] == 0
    assert figures[("quartermaster_tick_started_jobs", ())] == 1
    assert figures[("quartermaster_tick_duration_seconds", ())] > 0
    assert (
        figures[("quartermaster_dispatch_errors_total", ())] == JobEvent.objects.filter(kind="dispatch_retry").count()
    )


def test_scrape_cost_does_not_grow_with_jobs(world, client, django_assert_max_num_queries):
    for _ in range(20):
        submit(world.alice, world.lab)
    # 9: the fairness watch's one query over the last day's ended jobs joined the eight
    with django_assert_max_num_queries(9):
        client.get("/metrics")


def test_a_configured_token_is_required(world, client, settings):
    settings.MONITORING_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    scrape(client, HTTP_AUTHORIZATION="Bearer s3cret")


def test_outside_debug_metrics_need_a_token_or_an_explicit_opening(world, client, settings):
    settings.DEBUG = False
    settings.MONITORING_METRICS_TOKEN = ""
    settings.MONITORING_METRICS_PUBLIC = False
    refused = client.get("/metrics")
    assert refused.status_code == 403 and b"MONITORING_METRICS_TOKEN" in refused.content
    settings.MONITORING_METRICS_PUBLIC = True
    assert client.get("/metrics").status_code == 200


def test_fairness_over_the_last_day_is_exported(world, client):
    now = timezone.now()
    finished(world.alice, world.lab, now - timedelta(hours=1), waited=timedelta(0), ran=timedelta(hours=1))
    finished(world.charlie, world.other, now - timedelta(hours=1), waited=timedelta(hours=3), ran=timedelta(hours=1))
    finished(world.alice, world.lab, now - timedelta(days=2), waited=timedelta(hours=9), ran=timedelta(hours=1))
    lines = client.get("/metrics").content.decode().splitlines()
    assert "quartermaster_fairness_jain_index 0.7352941176470589" in lines  # (1 + 4)^2 / (2 * 17)
    assert 'quartermaster_fairness_worst_slowdown_ratio{account="other"} 1.6' in lines  # 4 / 2.5
    assert 'quartermaster_account_slowdown{account="lab"} 1.0' in lines
    assert 'quartermaster_account_slowdown{account="other"} 4.0' in lines
    assert "# TYPE quartermaster_fairness_jain_index gauge" in lines


def test_a_day_without_ended_jobs_is_fair_and_names_no_account(world, client):
    figures = scrape(client)
    assert figures[("quartermaster_fairness_jain_index", ())] == 1.0
    assert not [
        key
        for key in figures
        if key[0] in ("quartermaster_fairness_worst_slowdown_ratio", "quartermaster_account_slowdown")
    ]
