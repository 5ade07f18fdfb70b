"""The GPU process audit over stored samples (``monitoring.audit``): each rule found on
real rows, a finding kept once and cleared when its process is gone, and a flagged GPU
kept from new jobs as an unhealthy one is."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from monitoring.audit import audit_processes
from monitoring.gpu_health import unhealthy_gpu_ids
from monitoring.models import ProcessFinding
from scheduler.choices import NodeState
from scheduler.models import Gpu
from tests.builders import T0, give_identity, gpu_process, run_attempt, submit
from tests.monitoring.conftest import sample

NOW = T0 + timedelta(days=1)
ALICE, STRANGER = 1001, 4000


@pytest.fixture
def frozen():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


def findings():
    return list(
        ProcessFinding.objects.filter(cleared_at__isnull=True).values_list("gpu__index", "rule", "pid", "job_id")
    )


def flagged(node_name="h100-01"):
    return sorted(Gpu.objects.filter(pk__in=unhealthy_gpu_ids(), node__name=node_name).values_list("index", flat=True))


@pytest.mark.django_db
def test_a_process_on_a_gpu_the_portal_believes_free_is_foreign(world, agent, frozen):
    agent.post_samples([sample(3, NOW, processes=[gpu_process(777, uid=STRANGER, user="mallory")]), sample(4, NOW)])
    assert audit_processes(NOW)["opened"] == 1
    assert findings() == [(3, "foreign", 777, None)]
    [finding] = ProcessFinding.objects.all()
    assert (finding.uid, finding.user, finding.command) == (STRANGER, "mallory", "python")
    assert finding.used_memory_mib == 1024
    assert finding.reason == "no job of the portal holds this GPU"
    assert flagged() == [3]


@pytest.mark.django_db
def test_a_jobs_process_on_a_gpu_it_was_not_given_escaped(world, agent, frozen):
    give_identity(world.alice, ALICE)
    job = submit(world.alice, world.lab)
    run_attempt(job, NOW - timedelta(minutes=10), None, node="h100-01", gpus=1)  # holds GPU 0
    agent.post_samples(
        [
            sample(0, NOW, processes=[gpu_process(100, uid=ALICE)]),
            sample(2, NOW, processes=[gpu_process(101, uid=ALICE)]),
        ]
    )
    audit_processes(NOW)
    assert findings() == [(2, "escaped", 101, job.id)]
    assert flagged() == [2]


@pytest.mark.django_db
def test_a_process_left_on_an_ended_jobs_gpu_past_the_grace_is_a_leftover(world, agent, frozen, settings):
    settings.MONITORING_PROCESS_GRACE_SECONDS = 120
    give_identity(world.alice, ALICE)
    job = submit(world.alice, world.lab)
    run_attempt(job, NOW - timedelta(hours=1), NOW - timedelta(seconds=90), node="h100-01", gpus=1)
    agent.post_samples([sample(0, NOW, processes=[gpu_process(100, uid=ALICE)])])
    audit_processes(NOW)
    assert findings() == []  # 90 s after its end: within the grace

    later = NOW + timedelta(seconds=60)
    frozen.move_to(later)
    agent.post_samples([sample(0, later, processes=[gpu_process(100, uid=ALICE)])])
    audit_processes(later)
    assert findings() == [(0, "leftover", 100, job.id)]
    assert ProcessFinding.objects.get().reason == f"still on GPU 0 2 min after job {job.id} ended (grace 120 s)"
    assert flagged() == [0]


@pytest.mark.django_db
def test_a_finding_is_kept_once_and_clears_when_a_newer_sample_no_longer_shows_it(world, agent, frozen):
    stray = [gpu_process(777, uid=STRANGER)]
    agent.post_samples([sample(3, NOW, processes=stray)])
    audit_processes(NOW)
    audit_processes(NOW)  # the same sample judged again: still one finding
    assert ProcessFinding.objects.count() == 1

    # No newer sample (the agent is silent): it stays open; silence does not show it gone.
    frozen.move_to(NOW + timedelta(seconds=30))
    assert audit_processes(NOW + timedelta(seconds=30))["cleared"] == 0
    assert flagged() == [3]

    # Seen again: refreshed, not duplicated.
    at = NOW + timedelta(seconds=40)
    agent.post_samples([sample(3, at, processes=stray)])
    audit_processes(at)
    [finding] = ProcessFinding.objects.all()
    assert (finding.first_seen_at, finding.last_seen_at, finding.cleared_at) == (NOW, at, None)

    # Gone from a newer sample: cleared at that sample's time, and the GPU takes jobs again.
    gone = NOW + timedelta(seconds=50)
    agent.post_samples([sample(3, gone, processes=[])])
    assert audit_processes(gone)["cleared"] == 1
    finding.refresh_from_db()
    assert finding.cleared_at == gone
    assert flagged() == []


@pytest.mark.django_db
def test_a_process_that_a_job_now_accounts_for_clears(world, agent, frozen):
    give_identity(world.alice, ALICE)
    agent.post_samples([sample(0, NOW, processes=[gpu_process(100, uid=ALICE)])])
    audit_processes(NOW)
    assert findings() == [(0, "foreign", 100, None)]
    job = submit(world.alice, world.lab)
    run_attempt(job, NOW, None, node="h100-01", gpus=1)
    at = NOW + timedelta(seconds=10)
    agent.post_samples([sample(0, at, processes=[gpu_process(100, uid=ALICE)])])
    audit_processes(at)
    assert findings() == []


@pytest.mark.django_db
def test_the_scheduler_places_no_new_job_on_a_gpu_with_a_foreign_process(world, agent, tick, frozen):
    from scheduler.models import Node

    Node.objects.exclude(name="h100-01").update(state=NodeState.DRAIN)
    agent.post_samples([sample(i, NOW, processes=[gpu_process(700 + i, uid=STRANGER)]) for i in range(8) if i != 5])
    audit_processes(NOW)
    job = submit(world.alice, world.lab, gpus_per_node=1)
    tick()
    job.refresh_from_db()
    assert job.allocations == [{"node": "h100-01", "gpu_indices": [5], "cpus": 1, "memory_mib": 0}]
    second = submit(world.alice, world.lab, gpus_per_node=1)
    tick()
    second.refresh_from_db()
    assert (second.state, second.allocations) == ("PENDING", [])


@pytest.mark.django_db
def test_the_api_lists_findings_to_staff_only(world, agent, frozen, client_for):
    agent.post_samples([sample(3, NOW, processes=[gpu_process(777, uid=STRANGER, user="mallory", command="xmrig")])])
    audit_processes(NOW)
    url = "/api/v1/monitoring/process-findings/"
    assert client_for(world.alice).get(url).status_code == 403
    [listed] = client_for(world.admin).get(url).json()["results"]
    assert {k: listed[k] for k in ("node", "gpu", "rule", "pid", "uid", "user", "command", "job", "cleared_at")} == {
        "node": "h100-01",
        "gpu": 3,
        "rule": "foreign",
        "pid": 777,
        "uid": STRANGER,
        "user": "mallory",
        "command": "xmrig",
        "job": None,
        "cleared_at": None,
    }
    gone = NOW + timedelta(seconds=10)
    agent.post_samples([sample(3, gone, processes=[])])
    audit_processes(gone)
    assert client_for(world.admin).get(url).json()["results"] == []
    assert [f["pid"] for f in client_for(world.admin).get(url, {"state": "all"}).json()["results"]] == [777]
    assert client_for(world.admin).get(url, {"node": "l4-01", "state": "all"}).json()["results"] == []
    bad = client_for(world.admin).get(url, {"state": "closed"})
    assert bad.status_code == 400 and "state" in bad.json()
