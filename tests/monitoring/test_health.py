"""Health for the scheduler: hot, throttling or XID GPUs get no new jobs; a critical XID
drains the node with the reason; the affected job's detail says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from monitoring import health
from monitoring.services import health_notes_for_job
from scheduler.choices import NodeState
from scheduler.tick.snapshot import load_nodes
from tests.builders import T0, submit
from tests.monitoring.conftest import sample

NOW = T0 + timedelta(days=1)
RULES = health.Thresholds()


@pytest.mark.parametrize(
    "fields,expected",
    [
        ({"temperature_c": 70}, ""),
        ({"temperature_c": 91}, "temperature 91 °C over the 85 °C threshold"),
        ({"throttle_reasons": ["sw_power_cap"]}, ""),
        ({"throttle_reasons": ["hw_thermal_slowdown"]}, "throttling (hw_thermal_slowdown)"),
        (
            {"throttle_reasons": ["hw_power_brake_slowdown", "hw_slowdown"]},
            "throttling (hw_power_brake_slowdown, hw_slowdown)",
        ),
    ],
    ids=["cool", "over the threshold", "at its power cap is normal", "thermal throttling", "power brake"],
)
def test_condition_rules(fields, expected):
    assert health.condition(fields, RULES) == expected


def test_the_same_xid_again_is_not_new_but_another_is():
    assert health.is_new_xid(79, None) and health.is_new_xid(48, 79)
    assert not health.is_new_xid(79, 79) and not health.is_new_xid(None, 79)


def unhealthy_indices(node_name):
    [view] = [n for n in load_nodes() if n.name == node_name]
    return [g.index for g in view.gpus if not g.healthy]


@pytest.fixture
def frozen():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.mark.django_db
def test_hot_or_throttling_gpus_are_unhealthy_to_the_scheduler(agent, node, frozen):
    agent.post_samples(
        [
            sample(0, NOW, temperature_c=92),
            sample(1, NOW, throttle_reasons=["hw_slowdown"]),
            sample(2, NOW, temperature_c=60, throttle_reasons=["sw_power_cap"]),
        ]
    )
    assert unhealthy_indices("h100-01") == [0, 1]
    # Cooled down: the newest sample decides.
    agent.post_samples([sample(0, NOW + timedelta(seconds=10), temperature_c=70)])
    assert unhealthy_indices("h100-01") == [1]


@pytest.mark.django_db
def test_a_late_old_sample_does_not_override_newer_health(agent, frozen):
    agent.post_samples([sample(0, NOW, temperature_c=70)])
    agent.post_samples([sample(0, NOW - timedelta(minutes=5), temperature_c=95)])
    assert unhealthy_indices("h100-01") == []


@pytest.mark.django_db
def test_a_new_xid_keeps_the_gpu_from_new_jobs_for_the_hold_period(agent, node, frozen, settings):
    settings.MONITORING_XID_HOLD_SECONDS = 600
    agent.post_samples([sample(5, NOW, xid=13)])
    assert unhealthy_indices("h100-01") == [5]
    node.refresh_from_db()
    assert node.state == NodeState.UP  # XID 13 is not critical
    frozen.move_to(NOW + timedelta(seconds=601))
    assert unhealthy_indices("h100-01") == []


@pytest.mark.django_db
def test_the_scheduler_places_no_new_job_on_an_unhealthy_gpu(world, agent, tick, frozen):
    hot = [sample(i, NOW, temperature_c=95) for i in range(8) if i != 6]
    agent.post_samples(hot)
    from scheduler.models import Node

    Node.objects.exclude(name="h100-01").update(state=NodeState.DRAIN)
    job = submit(world.alice, world.lab, gpus_per_node=1)
    tick()
    job.refresh_from_db()
    assert job.allocations == [{"node": "h100-01", "gpu_indices": [6], "cpus": 1, "memory_mib": 0}]


@pytest.mark.django_db
def test_a_critical_xid_drains_the_node_with_the_reason_and_audits_it_as_monitoring(agent, node, frozen):
    from people.models import AuditEntry

    response = agent.post_samples([sample(3, NOW, xid=79)])
    assert response.json()["drained"] is True
    node.refresh_from_db()
    assert node.state == NodeState.DRAIN
    reason = "XID 79 (GPU has fallen off the bus) on GPU 3 (monitoring)"
    assert node.reason == reason
    [entry] = AuditEntry.objects.all()
    assert (entry.actor, entry.actor_name, entry.action) == (None, "monitoring", "drain")
    assert (entry.target_type, entry.target_repr) == ("node", "h100-01")
    assert entry.changes == {"reason": ["", reason], "state": ["up", "drain"]}


@pytest.mark.django_db
def test_an_admins_drain_reason_is_kept(world, agent, node, frozen):
    from scheduler.clusters.nodes import drain_node

    drain_node(node, reason="maintenance", by=world.admin)
    agent.post_samples([sample(3, NOW, xid=79)])
    node.refresh_from_db()
    assert node.reason == "maintenance"


@pytest.mark.django_db
def test_the_same_xid_repeated_by_dcgm_does_not_drain_again(world, agent, node, frozen):
    from scheduler.clusters.nodes import resume_node

    agent.post_samples([sample(3, NOW, xid=79)])
    resume_node(node, by=world.admin)  # an admin checked the GPU and resumed the node
    agent.post_samples([sample(3, NOW + timedelta(seconds=10), xid=79)])
    node.refresh_from_db()
    assert node.state == NodeState.UP


@pytest.mark.django_db
def test_the_job_detail_says_when_its_gpus_are_affected(world, agent, tick, frozen):
    from scheduler.models import Node

    Node.objects.exclude(name="h100-01").update(state=NodeState.DRAIN)
    job = submit(world.alice, world.lab, gpus_per_node=2)
    tick()
    job.refresh_from_db()
    held = job.allocations[0]["gpu_indices"]
    assert health_notes_for_job(job) == []
    agent.post_samples([sample(held[0], NOW, temperature_c=93), sample(held[1], NOW, xid=79)])
    notes = health_notes_for_job(job)
    assert notes == [
        f"GPU {held[0]} on h100-01: temperature 93 °C over the 85 °C threshold.",
        f"GPU {held[1]} on h100-01: XID 79 (GPU has fallen off the bus) at {NOW:%Y-%m-%d %H:%M} UTC.",
        f"Node h100-01 is drained: XID 79 (GPU has fallen off the bus) on GPU {held[1]} (monitoring).",
    ]


@pytest.mark.django_db
def test_other_jobs_gpus_are_not_mentioned(world, agent, frozen):
    job = submit(world.alice, world.lab)
    job.allocations = [{"node": "h100-01", "gpu_indices": [0], "cpus": 1, "memory_mib": 0}]
    agent.post_samples([sample(1, NOW, temperature_c=99)])
    assert health_notes_for_job(job) == []


@pytest.mark.django_db
def test_health_adds_one_query_to_loading_nodes(world, django_assert_num_queries):
    load_nodes()  # on PostgreSQL the process keeps the views from here on (scheduler.tick.kept)
    with django_assert_num_queries(3):  # nodes, health, GPUs (on PostgreSQL, their versions' digest)
        load_nodes()
