"""A Slurm user's script runs as written: its ``#SBATCH`` lines and ``sbatch_options``
become the job's fields, the body's own fields over both, and an option the portal does
not apply is a 400 naming it; nothing is dropped."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.choices import JobState
from scheduler.models import Job, JobEvent
from tests.builders import join, make_account

pytestmark = pytest.mark.django_db

#: The issue's script: what a Slurm user submits as it is.
ISSUE_SCRIPT = """#!/bin/bash
#SBATCH --job-name=resnet
#SBATCH --gres=gpu:2
#SBATCH --time=01:00:00
#SBATCH --array=0-3
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --account=vision

python train.py --shard "$SLURM_ARRAY_TASK_ID"
"""


@pytest.fixture
def vision(world):
    account = make_account("vision")
    join(world.alice, account)
    return account


def submit(client, **body: Any):
    return client.post("/api/v1/jobs/", body, format="json")


def test_the_issue_s_script_lands_as_exactly_its_directives(world, client_for, vision):
    response = submit(client_for(world.alice), script=ISSUE_SCRIPT)

    assert response.status_code == 201, response.json()
    tasks = Job.objects.filter(array_job_id=response.json()["array_job"]).order_by("array_task_id")
    assert [t.array_task_id for t in tasks] == [0, 1, 2, 3]
    for task in tasks:
        shape = (task.name, task.gpus_per_node, task.walltime_seconds, task.cpus_per_node, task.memory_mib_per_node)
        assert shape == ("resnet", 2, 3600, 4, 16384)
        assert (task.account.name, task.nodes, task.script) == ("vision", 1, ISSUE_SCRIPT.strip())


def test_options_win_over_the_script_and_the_body_s_fields_over_both(world, client_for, vision):
    response = submit(
        client_for(world.alice),
        script=ISSUE_SCRIPT,
        sbatch_options=["-t", "30", "--gres=gpu:1", "-J", "from-options"],
        account="lab",
        memory_mib_per_node=1024,
    )

    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.name, job.account.name, job.walltime_seconds, job.gpus_per_node) == ("from-options", "lab", 1800, 1)
    assert job.memory_mib_per_node == 1024
    assert (job.cpus_per_node, job.array_task_count) == (4, 4)  # the script's


def test_a_field_given_as_a_field_and_as_an_option_is_refused(world, client_for):
    response = submit(client_for(world.alice), command="true", walltime_seconds=600, sbatch_options=["--time=10"])

    assert response.status_code == 400
    assert (
        "--time=10 says walltime_seconds, which this body gives as a field too" in response.json()["sbatch_options"][0]
    )
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"script": "#!/bin/bash\n#SBATCH --partition=gpu\ntrue\n"}, "script", "--partition=gpu (#SBATCH line 2)"),
        ({"script": "#!/bin/bash\n#SBATCH -w node1\ntrue\n"}, "script", "-w node1 (#SBATCH line 2)"),
        ({"script": "#!/bin/bash\n#SBATCH --signal=B:USR1@60\ntrue\n"}, "script", "--signal=B:USR1@60"),
        ({"command": "true", "sbatch_options": ["--exclusive"]}, "sbatch_options", "--exclusive is not supported"),
        ({"command": "true", "sbatch_options": ["-t", "forever"]}, "sbatch_options", "-t forever: 'forever'"),
        ({"command": "true", "sbatch_options": ["train.py"]}, "sbatch_options", "'train.py' is not an option"),
    ],
    ids=["partition", "nodelist", "unknown", "exclusive", "bad time", "not an option"],
)
def test_an_option_the_portal_does_not_apply_is_a_400_naming_it(world, client_for, body, field, words):
    response = (
        submit(client_for(world.alice), walltime_seconds=600, **body)
        if "-t" not in str(body)
        else submit(client_for(world.alice), **body)
    )

    assert response.status_code == 400, response.json()
    assert any(words in line for line in response.json()[field]), response.json()
    assert not Job.objects.exists()


def test_a_value_the_api_refuses_is_named_as_the_directive_that_gave_it(world, client_for):
    script = "#!/bin/bash\n#SBATCH --nodes=1 --gres=gpu:64 -t 10\ntrue\n"
    response = submit(client_for(world.alice), script=script)

    assert response.status_code == 400
    assert response.json()["gpus_per_node"][0].startswith("--gres=gpu:64 (#SBATCH line 2): ")


def test_directives_after_the_first_command_are_comments(world, client_for):
    script = "#!/bin/bash\n#SBATCH -t 10\necho hi\n#SBATCH --partition=never-read\n"
    response = submit(client_for(world.alice), script=script)

    assert response.status_code == 201, response.json()
    assert Job.objects.get().walltime_seconds == 600


def test_hold_submits_the_job_held(world, client_for):
    response = submit(client_for(world.alice), script="#!/bin/bash\n#SBATCH -H -t 5\ntrue\n")

    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert (job.state, job.pending_reason) == (JobState.HELD, "JobHeldUser")
    assert "held until released" in JobEvent.objects.get(job=job).message
    assert client_for(world.alice).post(f"/api/v1/jobs/{job.id}/release/").json()["state"] == "PENDING"


def test_script_args_reach_the_script_after_its_directives(world, client_for):
    script = '#!/bin/bash\n#SBATCH -t 5\necho "$1"\n'
    response = submit(client_for(world.alice), script=script, script_args=["a b", "c"])

    assert response.status_code == 201, response.json()
    assert Job.objects.get().script == "#!/bin/bash\n#SBATCH -t 5\nset -- 'a b' c\necho \"$1\""


def test_the_estimate_reads_the_script_too_and_refuses_hold(world, client_for):
    client = client_for(world.alice)
    answer = client.post(
        "/api/v1/jobs/estimate/", {"script": "#!/bin/bash\n#SBATCH -t 5 --gres=gpu:64\ntrue\n"}, format="json"
    )
    assert answer.status_code == 400 and "--gres=gpu:64" in answer.json()["gpus_per_node"][0]
    answer = client.post(
        "/api/v1/jobs/estimate/", {"command": "true", "sbatch_options": ["-t5", "--hold"]}, format="json"
    )
    assert answer.status_code == 400 and "released" in answer.json()["hold"][0]


@pytest.mark.parametrize(
    ("old", "points_at"),
    [("chdir", "'workdir'"), ("comment", "Not a field here")],
)
def test_the_slurm_field_names_point_at_what_ships(world, client_for, old, points_at):
    response = submit(client_for(world.alice), command="true", walltime_seconds=60, **{old: "x"})

    assert response.status_code == 400
    assert points_at in response.json()[old][0] and "not supported yet" not in response.json()[old][0].lower()


@pytest.mark.parametrize(
    ("script_name", "name"),
    [("train.sbatch", "train.sbatch"), ("runs/nightly/eval.sh", "eval.sh"), ("", "script"), ("  ", "script")],
)
def test_a_script_is_named_after_its_file_when_nothing_else_names_it(world, client_for, script_name, name):
    response = submit(client_for(world.alice), walltime_seconds=600, script="true\n", script_name=script_name)

    assert response.status_code == 201, response.json()
    assert Job.objects.get().name == name


def test_a_script_files_name_is_plain_text(world, client_for):
    response = submit(client_for(world.alice), walltime_seconds=600, script="true\n", script_name="a\u202eb.sh")

    assert response.status_code == 400 and "script_name" in response.json()
    assert not Job.objects.exists()
