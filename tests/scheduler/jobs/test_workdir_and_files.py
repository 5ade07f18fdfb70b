"""A submission's working directory and the files it brings: where a job may start (the
owner's own trees, never the portal's), what it may bring (a few text files, named
within its directory), and that both reach the backend with the job."""

from __future__ import annotations

import pytest
from django.conf import settings

from people.models import ClusterIdentity
from scheduler.backends import local_runner as runner
from scheduler.clusters.dispatch import job_spec
from scheduler.models import Job

JOB = {"name": "x", "command": "python3 train.py", "gpus_per_node": 1, "walltime_seconds": 600}


def post(client, **changes):
    return client.post("/api/v1/jobs/", {**JOB, **changes}, format="json")


def test_files_and_workdir_reach_the_backend_with_the_job(world, client_for):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, gid=20001)
    files = {"train.py": "print('hi')\n", "conf/run.yaml": "lr: 0.1\n"}
    response = post(client_for(world.alice), workdir="/home/alice/project", files=files)
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    spec = job_spec(job)
    assert (spec.workdir, dict(spec.files)) == ("/home/alice/project", files)
    detail = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()
    assert detail["file_names"] == ["conf/run.yaml", "train.py"] and detail["workdir"] == "/home/alice/project"
    listed = client_for(world.alice).get("/api/v1/jobs/").json()["results"][0]
    assert listed["file_names"] is None  # lists never read the files


@pytest.mark.parametrize(
    ("workdir", "words"),
    [
        ("project", "absolute path"),
        ("/home/alice/../bob", "absolute path"),
        ("/home/alice//x", "absolute path"),
        ("/home/bob/project", "only under /home/alice, /scratch/alice"),
        ("/etc", "only under"),
        ("/home/alicex", "only under"),
    ],
)
def test_a_workdir_outside_the_owners_trees_is_a_400(world, client_for, workdir, words):
    response = post(client_for(world.alice), workdir=workdir)
    assert response.status_code == 400 and words in response.json()["workdir"][0]
    assert not Job.objects.exists()


def test_the_portals_own_tree_is_refused_whatever_the_roots_allow(world, client_for, settings):
    settings.JOB_WORKDIR_ROOTS = ["/"]
    for inside in (settings.BASE_DIR, settings.VAR_DIR / "work", settings.BASE_DIR.parent):
        response = post(client_for(world.alice), workdir=str(inside))
        assert response.status_code == 400 and "portal's own files" in response.json()["workdir"][0], inside
    assert post(client_for(world.alice), workdir="/opt/elsewhere").status_code == 201


def test_the_workdir_roots_name_the_owners_cluster_user(world, client_for):
    ClusterIdentity.objects.create(user=world.alice, username="asmith", uid=20001, gid=20001)
    assert post(client_for(world.alice), workdir="/scratch/asmith/run").status_code == 201
    assert post(client_for(world.alice), workdir="/scratch/alice/run").status_code == 400


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"../escape.py": "x"}, "plain relative path"),
        ({"/etc/cron.d/x": "x"}, "not a relative file name"),
        ({f"f{i}": "" for i in range(51)}, "At most 50 files"),
        ({"big.txt": "x" * 1_000_001}, "at most 1000000 may come with a job"),
        ({"a.py": 5}, "Must be a JSON string"),
    ],
    ids=["dotdot", "absolute", "too many", "too big", "not text"],
)
def test_files_that_cannot_be_brought_are_a_400(world, client_for, files, words):
    response = post(client_for(world.alice), files=files)
    assert response.status_code == 400 and words in str(response.json()["files"])
    assert not Job.objects.exists()


@pytest.mark.parametrize("name", [runner.SETUP_FILE, runner.SCRIPT_FILE, ".qm-job-7.sh", ".qm-anything/x"])
def test_a_name_the_backends_use_for_their_own_files_is_a_400(world, client_for, name):
    """The local runner writes the files with ``.qm-files.sh`` and runs a script from
    ``job.sh`` in the job's directory; Slurm's ranks run from ``.qm-job-<key>.sh``. A job
    file of that name would replace the portal's own, so it is refused, naming the field."""
    response = post(client_for(world.alice), files={name: "echo pwned\n"})

    assert response.status_code == 400, response.json()
    assert "the portal's own" in str(response.json()["files"]) and name in str(response.json()["files"])
    assert not Job.objects.exists()


def test_the_reserved_names_are_only_the_top_level_ones(world, client_for):
    response = post(client_for(world.alice), files={"conf/job.sh": "x", "my.qm-files.sh": "x"})
    assert response.status_code == 201, response.json()


def test_the_limits_are_settings(world, client_for):
    assert settings.JOB_FILES_MAX_BYTES == 1_000_000 and settings.JOB_FILES_MAX_COUNT == 50
