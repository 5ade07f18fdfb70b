"""POST /api/v1/monitoring/samples/: batched, per-node authenticated, validated, idempotent."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from monitoring.models import GpuSample
from tests.builders import T0
from tests.monitoring.conftest import sample

NOW = T0 + timedelta(days=1)
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def test_a_batch_is_stored_and_counted(agent, node):
    response = agent.post_samples([sample(i, NOW - timedelta(seconds=10)) for i in range(8)], node=node.name)
    assert response.status_code == 200, response.json()
    assert response.json() == {"received": 8, "accepted": 8, "rejected": [], "drained": False}
    assert GpuSample.objects.filter(gpu__node=node).count() == 8


def test_bad_samples_are_rejected_with_clear_errors_and_the_rest_kept(agent):
    at = NOW - timedelta(seconds=10)
    response = agent.post_samples(
        [
            sample(0, at),
            sample(1, at, utilization_pct=130),
            {**sample(2, at), "at": "yesterday"},
            sample(3, at, memory_used_mib=None),
            sample(42, at),
            sample(4, at, colour="red"),
            {**sample(5, at), "at": "2026-01-02T00:00:00"},
        ]
    )
    assert response.status_code == 200
    rejected = {r["index"]: r["errors"] for r in response.json()["rejected"]}
    assert rejected == {
        1: {"utilization_pct": "Must be between 0 and 100."},
        2: {"at": "Must be an ISO 8601 date-time, e.g. 2026-01-01T12:00:00Z."},
        3: {"memory_used_mib": "This field is required."},
        4: {"gpu": "No GPU with index 42 on node h100-01."},
        5: {"colour": "Unknown field."},
        6: {"at": "Must include a time zone (Z or +00:00)."},
    }
    assert response.json()["accepted"] == 1
    assert GpuSample.objects.count() == 1


def test_samples_from_the_future_or_past_retention_are_rejected(agent):
    response = agent.post_samples([sample(0, NOW + timedelta(hours=1)), sample(1, NOW - timedelta(days=3))])
    assert response.status_code == 400  # nothing valid
    assert [r["errors"]["at"] for r in response.json()["rejected"]] == [
        "Is in the future; check the node's clock.",
        "Is older than the raw-sample retention.",
    ]


def test_sending_a_batch_twice_stores_it_once(agent):
    batch = [sample(i, NOW - timedelta(seconds=s)) for i in range(4) for s in (10, 20)]
    assert agent.post_samples(batch).status_code == 200
    assert agent.post_samples(batch).status_code == 200
    assert GpuSample.objects.count() == 8


def test_a_resent_batch_with_new_samples_stores_the_new_ones(agent):
    old = [sample(i, NOW - timedelta(seconds=20)) for i in range(4)]
    new = [sample(i, NOW - timedelta(seconds=10)) for i in range(4)]
    assert agent.post_samples(old).json()["accepted"] == 4
    response = agent.post_samples(old + new)
    assert response.status_code == 200
    assert response.json()["accepted"] == 8  # stored now or already stored
    assert GpuSample.objects.count() == 8


def test_a_sample_repeated_within_a_batch_is_stored_once(agent):
    first = sample(0, NOW, utilization_pct=10.0)
    response = agent.post_samples([first, sample(1, NOW), {**first, "utilization_pct": 90.0}])
    assert response.status_code == 200
    assert GpuSample.objects.count() == 2
    assert GpuSample.objects.get(gpu__index=0).utilization_pct in (10.0, 90.0)


def test_readings_are_stored_as_sent(agent):
    reasons = ['back\\slash "quoted"', "tab\tnewline\n", "ünïcode ☃"]
    processes = [{"pid": 7, "used_memory_mib": 2048}, {"pid": 8}]
    fields = {"temperature_c": -3.25, "power_w": 1e-5, "xid": 79, "sm_clock_mhz": 0}
    response = agent.post_samples([sample(0, NOW, throttle_reasons=reasons, processes=processes, **fields)])
    assert response.json()["accepted"] == 1
    stored = GpuSample.objects.get()
    assert (stored.throttle_reasons, stored.processes, stored.at) == (reasons, processes, NOW)
    assert (stored.temperature_c, stored.power_w, stored.xid, stored.sm_clock_mhz) == (-3.25, 1e-5, 79, 0)
    assert (stored.memory_total_mib, stored.ecc_errors) == (None, None)


def test_a_gpu_is_found_by_uuid(agent, node):
    gpu = node.gpus.get(index=3)
    response = agent.post_samples([{**sample(0, NOW), "index": None, "uuid": gpu.uuid}])
    assert response.json()["accepted"] == 1
    assert GpuSample.objects.get().gpu == gpu


def test_a_node_may_not_post_another_nodes_gpus(agent):
    from scheduler.models import Gpu

    foreign = Gpu.objects.get(node__name="h100-02", index=0)
    response = agent.post_samples([sample(0, NOW), {**sample(1, NOW), "uuid": foreign.uuid}])
    assert response.status_code == 403
    assert "belongs to another node" in response.json()["detail"]
    assert GpuSample.objects.count() == 0


def test_a_node_may_not_post_in_another_nodes_name(agent):
    response = agent.post_samples([sample(0, NOW)], node="h100-02")
    assert response.status_code == 403


@pytest.mark.parametrize(
    "header",
    [None, "Bearer qmnode_nope_nope", "Bearer qm_abc_def", "Bearer garbage"],
    ids=["no token", "unknown node token", "a personal API token", "malformed"],
)
def test_only_a_valid_node_token_may_post(client_for, world, header):
    client = client_for(None)
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.post("/api/v1/monitoring/samples/", {"samples": [sample(0, NOW)]}, format="json")
    assert response.status_code in (401, 403)
    assert GpuSample.objects.count() == 0


def test_a_logged_in_person_is_not_a_node(client_for, world):
    response = client_for(world.admin).post("/api/v1/monitoring/samples/", {"samples": [sample(0, NOW)]}, format="json")
    assert response.status_code in (401, 403)


def test_a_revoked_token_is_refused(agent):
    from monitoring.models import NodeToken

    NodeToken.objects.update(revoked_at=NOW)
    assert agent.post_samples([sample(0, NOW)]).status_code == 401


def test_a_batch_over_the_limit_is_refused_whole(agent, settings):
    settings.MONITORING_MAX_BATCH = 3
    response = agent.post_samples([sample(i, NOW) for i in range(4)])
    assert response.status_code == 400
    assert "At most 3 samples" in response.json()["samples"]


def test_a_body_without_samples_is_a_clear_400(agent):
    response = agent.post("/api/v1/monitoring/samples/", {"sample": []}, format="json")
    assert response.status_code == 400
    assert "samples" in response.json()


def test_the_node_agents_payload_is_what_the_api_accepts(agent):
    """What ``agent`` (the GPU node program) sends is what this API takes."""
    from django.utils import timezone

    from agent.collectors.base import Reading

    reading = Reading(index=0, uuid="", utilization_pct=1.0, memory_used_mib=2, xid=None)
    answer = agent.post_samples([reading.to_payload(timezone.now())])
    assert answer.status_code == 200 and answer.json()["accepted"] == 1
