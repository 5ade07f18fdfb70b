"""A job's own output files, as a Slurm user names them (``-o``/``-e`` on sbatch's command
line or in ``#SBATCH`` lines, or ``output_path``/``error_path`` in the body): applied with
sbatch's precedence, their patterns filled in for each job (each task of an array its
own), and a 400 naming the field, or the option, for a file a job may not write."""

from __future__ import annotations

from typing import Any

import pytest

from people.models import ClusterIdentity
from scheduler.backends.base import JobOutput
from scheduler.clusters.dispatch import job_spec
from scheduler.models import Job

pytestmark = pytest.mark.django_db

JOB = {"command": "python3 train.py", "gpus_per_node": 1, "walltime_seconds": 600}


def post(client, **body: Any):
    return client.post("/api/v1/jobs/", body, format="json")


@pytest.fixture
def alice(world):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, gid=20001)
    return world.alice


def test_a_script_s_output_files_reach_the_backend_filled_in_for_the_job(alice, client_for):
    script = "#!/bin/bash\n#SBATCH -J train -t 10\n#SBATCH -o logs/%x-%j.out\n#SBATCH -e logs/%x-%j.err\npython3 t.py\n"

    response = post(client_for(alice), script=script, workdir="/home/alice/run")

    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.output_path, job.error_path) == ("logs/%x-%j.out", "logs/%x-%j.err")
    assert job_spec(job).output == JobOutput(
        stdout=f"/home/alice/run/logs/train-{job.id}.out", stderr=f"/home/alice/run/logs/train-{job.id}.err"
    )
    detail = client_for(alice).get(f"/api/v1/jobs/{job.id}/").json()
    assert (detail["output_path"], detail["output_file"]) == (
        "logs/%x-%j.out",
        f"/home/alice/run/logs/train-{job.id}.out",
    )
    assert detail["error_file"] == f"/home/alice/run/logs/train-{job.id}.err"
    assert client_for(alice).get("/api/v1/jobs/").json()["results"][0]["output_file"] is None  # lists: not filled in


def test_options_win_over_the_script_and_the_body_s_fields_over_both(alice, client_for):
    script = "#!/bin/bash\n#SBATCH -t 10 -o from-script.out -e from-script.err\ntrue\n"

    response = post(client_for(alice), script=script, sbatch_options=["-o", "from-options.out"], error_path="body.err")

    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.output_path, job.error_path) == ("from-options.out", "body.err")


def test_with_output_alone_stderr_goes_to_the_same_file_and_dev_null_is_no_file(alice, client_for):
    combined = Job.objects.get(pk=post(client_for(alice), **JOB, output_path="run-%j.log").json()["id"])
    discarded = Job.objects.get(
        pk=post(client_for(alice), **JOB, output_path="/dev/null", error_path="err-%j.log").json()["id"]
    )
    neither = Job.objects.get(pk=post(client_for(alice), **JOB).json()["id"])

    assert job_spec(combined).output == JobOutput(stdout=f"run-{combined.id}.log", stderr=f"run-{combined.id}.log")
    assert job_spec(discarded).output == JobOutput(stdout="", stderr=f"err-{discarded.id}.log")
    assert job_spec(neither).output is None


def test_each_task_of_an_array_gets_its_own_file(alice, client_for):
    response = post(client_for(alice), **JOB, array="0-2", output_path="/home/alice/out-%A_%a.txt")

    assert response.status_code == 201, response.json()
    tasks = Job.objects.filter(array_job_id=response.json()["array_job"]).order_by("array_task_id")
    first = tasks[0].id
    files = [job_spec(task).output for task in tasks]
    paths = [f"/home/alice/out-{first}_{i}.txt" for i in range(3)]
    assert files == [JobOutput(stdout=path, stderr=path) for path in paths]


def test_a_requeued_job_appends_to_its_files(alice, client_for):
    job = Job.objects.get(pk=post(client_for(alice), **JOB, output_path="run.log").json()["id"])
    assert job_spec(job).output == JobOutput("run.log", "run.log", append=False)

    Job.objects.filter(pk=job.pk).update(attempt=1)
    job.refresh_from_db()

    assert job_spec(job).output == JobOutput("run.log", "run.log", append=True)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"output_path": "out\x00.txt"}, "output_path", "NUL"),
        ({"error_path": "x" * 1025}, "error_path", "no more than 1024 characters"),
        ({"output_path": "out-%N.txt"}, "output_path", "One file per node (%N"),
        ({"error_path": "err-%q.txt"}, "error_path", "%q is not a pattern"),
        ({"output_path": "/etc/cron.d/evil"}, "output_path", "may lie only under /home/alice, /scratch/alice"),
        ({"output_path": "/home/bob/.bashrc"}, "output_path", "may lie only under"),
        ({"error_path": "/home/alice/../bob/x"}, "error_path", "'..', '.' or '//' parts"),
        ({"output_path": "logs/out.txt"}, "output_path", "subdirectory of the job's own fresh directory"),
        ({"output_path": "job.sh"}, "output_path", "one of the portal's own files"),
        ({"output_path": "../../bob/x", "workdir": "/home/alice/run"}, "output_path", "/home/bob/x does not"),
    ],
    ids=[
        "NUL",
        "too long",
        "per-node pattern",
        "unknown pattern",
        "outside the roots",
        "another user's home",
        "dot-dot",
        "subdirectory without a workdir",
        "the runner's own file",
        "relative, out of the roots",
    ],
)
def test_a_file_a_job_may_not_write_is_a_400_naming_the_field(alice, client_for, body, field, words):
    response = post(client_for(alice), **JOB, **body)

    assert response.status_code == 400, response.json()
    assert any(words in line for line in response.json()[field]), response.json()
    assert not Job.objects.exists()


def test_the_portal_s_own_files_are_refused_whatever_the_roots_allow(alice, client_for, settings):
    settings.JOB_WORKDIR_ROOTS = ["/"]

    response = post(client_for(alice), **JOB, output_path=str(settings.VAR_DIR / "db.sqlite3"))

    assert response.status_code == 400
    assert "portal's own files" in response.json()["output_path"][0]


def test_a_refused_directive_is_named_as_it_was_written(alice, client_for):
    script = "#!/bin/bash\n#SBATCH -t 10\n#SBATCH --output=/etc/passwd\ntrue\n"

    response = post(client_for(alice), script=script)

    assert response.status_code == 400
    assert response.json()["output_path"][0].startswith("--output=/etc/passwd (#SBATCH line 3): ")


def test_output_files_cannot_be_changed_once_submitted(alice, client_for):
    job_id = post(client_for(alice), **JOB, output_path="a.log").json()["id"]

    response = client_for(alice).patch(f"/api/v1/jobs/{job_id}/", {"output_path": "b.log"}, format="json")

    assert response.status_code == 400 and "Cannot change once submitted" in response.json()["output_path"][0]
