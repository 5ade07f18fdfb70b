"""A Slurm cluster driven end to end through the portal: sync, tick, dispatch, poll, drain.

Tests marked ``slurm`` run against the real Slurm dev cluster (scripts/slurm-dev-cluster.sh:
node1..node4, 8 GPUs each, GRES types a100 and h100); they skip without one, and fail in CI.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from people.models import Account, ClusterIdentity, Membership
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
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db

GPU_MODELS = {
    "a100": {"model": "A100-80GB", "memory_mib": 81920, "compute_capability": "8.0"},
    "h100": {"model": "H100-80GB", "memory_mib": 81920, "compute_capability": "9.0"},
}


#: The personas with a Unix user of the same name on the dev cluster (scripts/slurm-dev-users.sh).
PERSONAS = ("alice", "bob", "dora", "charlie")


@pytest.fixture
def slurm_cluster(world: Any) -> Any:
    """The dev cluster as the only enabled cluster, its nodes synced into the portal;
    every persona's jobs run as the Unix user of the same name, with their output in a
    directory of this test's under their home.

    Refuses by itself, as the ``slurm`` marker does, where no cluster answers."""
    require_slurm()
    world.cluster.enabled = False
    world.cluster.save()
    for name in PERSONAS:
        ClusterIdentity.objects.create(user=getattr(world, name), username=name)
    test_dir = f".quartermaster/test-{uuid.uuid4().hex[:12]}"
    cluster = Cluster.objects.create(
        name="devcluster",
        kind="slurm",
        config={"slurm_conf": slurm_dev.slurm_conf(), "output_dir": f"{{home}}/{test_dir}", "gpu_models": GPU_MODELS},
    )
    poll_cluster(cluster)
    yield cluster
    slurm_dev.scancel_jobs_in(*(slurm_dev.home_of(name) / test_dir for name in PERSONAS))


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
        # The next test must find a cluster that can start jobs: a restarted slurmctld
        # starts nothing on a node until that node's slurmd has registered again.
        wait_for(slurm_dev.nodes_responding, timeout=60, what="every slurmd to register again")


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


# --- Every job runs as its owner ---------------------------------------------------------------


def sacct(job: Job, fields: str) -> str:
    env = {**os.environ, "SLURM_CONF": slurm_dev.slurm_conf()}
    done = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job.external_id, "-o", fields],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.strip()


@pytest.mark.slurm
def test_a_job_submitted_through_the_api_runs_as_its_owner_in_their_account(
    world: Any, slurm_cluster: Any, tick: Any, client_for: Any
) -> None:
    """The proof the issue asks for: alice's job in account nlp is alice's in Slurm (its
    processes, ``sacct``'s User and Account), and bob's job cannot read its output."""
    nlp = Account.objects.create(name="nlp")
    Membership.objects.create(user=world.alice, account=nlp)
    body = {"name": "whoami", "account": "nlp", "gpus_per_node": 1, "walltime_seconds": 600}
    response = client_for(world.alice).post(
        "/api/v1/jobs/", {**body, "command": 'echo "user=$(id -un) output=$(ls $PWD)"'}, format="json"
    )
    assert response.status_code == 201, response.json()
    alices = Job.objects.get(pk=response.json()["id"])
    tick()
    wait_for(lambda: finished(alices), what="alice's Slurm job to end")

    assert alices.state == JobState.COMPLETED
    assert "user=alice output=slurm-" in read_job_log(alices)
    assert sacct(alices, "User,Account") == "alice|nlp"

    output = slurm_cluster.config["output_dir"].format(home=slurm_dev.home_of("alice"), user="alice")
    bobs = submit(world.bob, world.lab, command=f"cat {output}/slurm-{alices.external_id}.out; ls {output}")
    tick()
    wait_for(lambda: finished(bobs), what="bob's Slurm job to end")
    log = read_job_log(bobs)
    assert sacct(bobs, "User,Account") == "bob|lab"
    assert bobs.state == JobState.FAILED and "Permission denied" in log and "user=alice" not in log


@pytest.mark.slurm
def test_a_user_without_a_cluster_identity_cannot_submit_and_is_told_why(
    world: Any, slurm_cluster: Any, client_for: Any
) -> None:
    ClusterIdentity.objects.filter(user=world.alice).delete()

    response = client_for(world.alice).post(
        "/api/v1/jobs/", {"name": "x", "command": "true", "gpus_per_node": 1, "walltime_seconds": 60}, format="json"
    )

    assert response.status_code == 400
    assert "no cluster identity" in response.json()["cluster_identity"][0]
    assert not Job.objects.exists()


@pytest.mark.slurm
def test_a_cancel_through_the_portal_reaches_the_owners_job(world: Any, slurm_cluster: Any, tick: Any) -> None:
    job = submit(world.dora, world.lab, command="sleep 60", gpus_per_node=1, walltime_seconds=600)
    tick()
    job.refresh_from_db()
    backend = backend_for(slurm_cluster)
    wait_for(lambda: backend.poll([job.external_id])[job.external_id].state.value == "RUNNING", what="running")
    assert sacct(job, "User") == "dora"

    cancel_job(job, by="test")
    cancel_remote(job.id)

    wait_for(lambda: backend.poll([job.external_id])[job.external_id].state.value == "CANCELLED", what="cancelled")


@pytest.mark.slurm
def test_an_array_runs_on_slurm_each_task_with_its_index_under_both_names(
    world: Any, slurm_cluster: Any, tick: Any, client_for: Any
) -> None:
    """A script written for ``sbatch --array`` reads SLURM_ARRAY_TASK_ID; a portable one
    QM_ARRAY_TASK_ID: each task, a Slurm job of its own with its own output, has both."""
    body = {"name": "sweep", "gpus_per_node": 1, "walltime_seconds": 600, "array": "3-5%2"}
    command = 'echo "qm=$QM_ARRAY_JOB_ID/$QM_ARRAY_TASK_ID/$QM_ARRAY_TASK_COUNT slurm=$SLURM_ARRAY_TASK_ID"'
    response = client_for(world.alice).post("/api/v1/jobs/", {**body, "command": command}, format="json")
    assert response.status_code == 201, response.json()
    first = response.json()["id"]
    tasks = list(Job.objects.filter(array_job_id=first).order_by("array_task_id"))

    tick()
    assert sorted(Job.objects.filter(array_job_id=first).values_list("state", flat=True)) == [
        JobState.PENDING,
        JobState.RUNNING,
        JobState.RUNNING,
    ]  # the throttle: two at once

    def ended(task: Job) -> Job | None:
        tick()  # the third task starts once one of the first two has ended
        return finished(task)

    for task in tasks:
        wait_for(partial(ended, task), what=f"task {task.array_task_id} to end")

    assert {task.state for task in tasks} == {JobState.COMPLETED}
    assert len({task.external_id for task in tasks}) == 3
    for task in tasks:
        assert f"qm={first}/{task.array_task_id}/3 slurm={task.array_task_id}" in read_job_log(task)


@pytest.mark.slurm
def test_a_ticks_first_hand_off_looks_nothing_up_and_a_retried_batch_looks_up_once(
    world: Any, slurm_cluster: Any, tick: Any, monkeypatch: Any
) -> None:
    """Dispatch is not one squeue and one sbatch after another: a first hand-off (the
    portal's count says no one handed the attempt over before) goes straight to
    concurrent sbatch calls. Handed off again, as another worker would after a crash
    that lost the RUNNING marks, the batch is looked up in one squeue and each job is
    found, not submitted twice."""
    from scheduler.backends.slurm import SlurmBackend
    from scheduler.clusters.dispatch import dispatch_jobs

    lookups: list[str] = []
    real_run = SlurmBackend._run

    def counting(self: SlurmBackend, argv: list[str], *, what: str, **kwargs: Any) -> str:
        if what.startswith("squeue (lookup"):
            lookups.append(what)
        return real_run(self, argv, what=what, **kwargs)

    monkeypatch.setattr(SlurmBackend, "_run", counting)
    jobs = [submit(world.alice, world.lab, command="sleep 2", gpus_per_node=1) for _ in range(6)]

    tick()

    for job in jobs:
        job.refresh_from_db()
    assert {job.state for job in jobs} == {JobState.RUNNING}
    first_ids = {job.id: job.external_id for job in jobs}
    assert len(set(first_ids.values())) == 6
    assert lookups == []

    ids = [job.id for job in jobs]
    Job.objects.filter(pk__in=ids).update(state=JobState.DISPATCHING, external_id="")
    backend = backend_for(slurm_cluster)
    assert isinstance(backend, SlurmBackend)
    for lock in backend._lock_dir.glob("*.lock"):
        lock.unlink()  # the retry runs on another host, which never saw these keys
    assert dispatch_jobs(ids) == []

    assert lookups == ["squeue (lookup of a batch by key)"]
    assert dict(Job.objects.filter(pk__in=ids).values_list("id", "external_id")) == first_ids
    for job in jobs:
        wait_for(partial(finished, job), what="the Slurm job to end")
    assert {job.state for job in jobs} == {JobState.COMPLETED}
