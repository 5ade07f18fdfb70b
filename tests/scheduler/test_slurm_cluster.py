"""A Slurm cluster driven end to end through the portal: sync, tick, dispatch, poll, drain.

Tests marked ``slurm`` run against the real Slurm dev cluster (scripts/slurm-dev-cluster.sh:
node1..node4, 8 GPUs each, GRES types a100 and h100); they skip without one, and fail in CI.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scheduler.choices import JobState, NodeState
from scheduler.clusters.logs import read_job_log
from scheduler.clusters.nodes import drain_node, resume_node
from scheduler.clusters.poll import poll_backends, poll_cluster
from scheduler.jobs.remote import backend_for, cancel_remote
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Cluster, Job
from tests import slurm_dev
from tests.builders import submit
from tests.conftest import require_slurm
from tests.scheduler.waiting import wait_for

pytestmark = pytest.mark.django_db

GPU_MODELS = {
    "a100": {"model": "A100-80GB", "memory_mib": 81920, "compute_capability": "8.0"},
    "h100": {"model": "H100-80GB", "memory_mib": 81920, "compute_capability": "9.0"},
}


@pytest.fixture
def slurm_cluster(world: Any, tmp_path: Any) -> Any:
    """The dev cluster as the only enabled cluster, its nodes synced into the portal.

    Refuses by itself, as the ``slurm`` marker does, where no cluster answers."""
    require_slurm()
    world.cluster.enabled = False
    world.cluster.save()
    cluster = Cluster.objects.create(
        name="devcluster",
        kind="slurm",
        config={"slurm_conf": slurm_dev.slurm_conf(), "log_dir": str(tmp_path / "logs"), "gpu_models": GPU_MODELS},
    )
    poll_cluster(cluster)
    yield cluster
    slurm_dev.scancel_jobs_in(tmp_path)


def scontrol(*args: str) -> None:
    env = {**os.environ, "SLURM_CONF": slurm_dev.slurm_conf()}
    subprocess.run(["scontrol", *args], env=env, check=True, capture_output=True, timeout=30)


def finished(job: Job) -> Job | None:
    poll_backends()
    job.refresh_from_db()
    return job if job.state not in (JobState.RUNNING, JobState.DISPATCHING) else None


@pytest.mark.slurm
def test_sync_brings_in_slurms_nodes_with_gpu_models_from_gres(slurm_cluster: Any) -> None:
    nodes = {n.name: n for n in slurm_cluster.nodes.all()}

    assert set(nodes) >= {"node1", "node2", "node3", "node4"}
    assert (nodes["node1"].cpus, nodes["node1"].memory_mib) == (16, 64000)
    assert {g.model for g in nodes["node1"].gpus.all()} == {"A100-80GB"}
    assert {g.model for g in nodes["node2"].gpus.all()} == {"H100-80GB"}
    assert nodes["node2"].gpus.count() == 8


@pytest.mark.slurm
def test_job_is_dispatched_to_slurm_and_completes_with_its_exit_code_and_log(
    world: Any, slurm_cluster: Any, tick: Any
) -> None:
    job = submit(world.alice, world.lab, command="echo hello from $SLURMD_NODENAME; exit 3", gpus_per_node=2)

    tick()

    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.external_id.isdigit()
    wait_for(lambda: finished(job), what="the Slurm job to end")
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)
    assert f"hello from {job.allocations[0]['node']}" in read_job_log(job)


@pytest.mark.slurm
def test_successful_job_completes(world: Any, slurm_cluster: Any, tick: Any) -> None:
    job = submit(world.alice, world.lab, command="true", gpus_per_node=1, gpu_model="H100-80GB")

    tick()
    wait_for(lambda: finished(job), what="the Slurm job to end")

    assert (job.state, job.exit_code) == (JobState.COMPLETED, 0)
    assert job.allocations[0]["node"] in ("node2", "node4")


@pytest.mark.slurm
def test_job_slurm_refuses_fails_with_slurms_message(world: Any, slurm_cluster: Any, tick: Any) -> None:
    slurm_cluster.config = {**slurm_cluster.config, "partition": "no-such-partition"}
    slurm_cluster.save()
    job = submit(world.alice, world.lab, command="true")

    tick()

    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert "Invalid partition name specified" in job.state_reason


@pytest.mark.slurm
def test_node_drained_in_slurm_is_drained_in_the_portal_and_back(slurm_cluster: Any) -> None:
    try:
        scontrol("update", "nodename=node3", "state=drain", "reason=bad fan")
        poll_cluster(slurm_cluster)
        node = slurm_cluster.nodes.get(name="node3")
        assert (node.state, node.reason) == (NodeState.DRAIN, "drained in backend: bad fan")
    finally:
        scontrol("update", "nodename=node3", "state=resume")

    def up() -> bool:  # Slurm reports a resumed node not responding until its next ping
        poll_cluster(slurm_cluster)
        return slurm_cluster.nodes.get(name="node3").state == NodeState.UP

    wait_for(up, what="node3 to be up again")


@pytest.mark.slurm
def test_node_drained_in_the_portal_is_drained_in_slurm(
    slurm_cluster: Any, django_capture_on_commit_callbacks: Any
) -> None:
    node = slurm_cluster.nodes.get(name="node4")
    backend = backend_for(slurm_cluster)
    try:
        with django_capture_on_commit_callbacks(execute=True):  # Slurm is told after commit
            drain_node(node, reason="maintenance", by="test")
        assert {n.name: n.state for n in backend.list_nodes()}["node4"] == "drain"
        poll_cluster(slurm_cluster)
        assert slurm_cluster.nodes.get(name="node4").reason == "maintenance"  # the admin's drain stays
    finally:
        with django_capture_on_commit_callbacks(execute=True):
            resume_node(node, by="test")
    wait_for(lambda: {n.name: n.state for n in backend.list_nodes()}["node4"] == "up", what="node4 up in Slurm")


def test_cluster_api_refuses_a_bad_slurm_config(world: Any, client_for: Any) -> None:
    response = client_for(world.admin).post(
        "/api/v1/clusters/", {"name": "s", "kind": "slurm", "config": {"partition": 3}}, format="json"
    )

    assert response.status_code == 400
    assert "partition must be a string" in str(response.json())


def restart_slurmctld(while_down: Any) -> Any:
    """Stop slurmctld (SIGTERM, as an admin's restart does), run ``while_down()``, start it
    again with the same slurm.conf and wait until it answers; returns what it returned."""
    conf = slurm_dev.slurm_conf()
    env = {**os.environ, "SLURM_CONF": conf}
    pid = int((Path(conf).parent.parent / "run" / "slurmctld.pid").read_text().strip())
    os.kill(pid, 15)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout=30, what="slurmctld to stop")
    try:
        return while_down()
    finally:
        subprocess.run(["slurmctld", "-f", conf], env=env, check=True, timeout=60)
        wait_for(
            lambda: subprocess.run(["scontrol", "ping"], env=env, capture_output=True).returncode == 0,
            timeout=60,
            what="slurmctld to answer",
        )


@pytest.mark.slurm
def test_a_slurmctld_restart_loses_no_job_and_polling_resumes(world: Any, slurm_cluster: Any, tick: Any) -> None:
    job = submit(world.alice, world.lab, command="sleep 20", gpus_per_node=1, walltime_seconds=600)
    tick()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING

    report = restart_slurmctld(poll_backends)

    assert report[slurm_cluster.name] == {"error": 1}  # the controller was away: nothing judged
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert Cluster.objects.get(pk=slurm_cluster.pk).reachable is False

    poll_backends()
    assert Cluster.objects.get(pk=slurm_cluster.pk).reachable is True
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.attempt == 0
    cancel_job(job, by="test")
    cancel_remote(job.id)
