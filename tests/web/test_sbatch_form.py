"""The submit form reads a script's ``#SBATCH`` lines as the API does (it shapes its body
with the API's serializer): what the form leaves empty comes from the script, what it
fills wins, and a directive the portal does not apply is an error on the script."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.choices import JobState
from scheduler.models import Job

pytestmark = pytest.mark.django_db

SCRIPT = """#!/bin/bash
#SBATCH --gres=gpu:2 --cpus-per-task=4 --mem=16G
#SBATCH --array=0-3 --time=30 --hold
python3 train.py
"""


def post(user, **fields: str):
    client = Client()
    client.force_login(user)
    return client.post("/jobs/new/", {"name": "train", "account": "lab", "walltime_seconds": "1h", **fields})


def test_the_form_applies_the_directives_of_the_fields_it_leaves_empty(world):
    response = post(world.alice, script=SCRIPT)

    assert response.status_code == 302, response.context["form"].errors
    tasks = Job.objects.filter(name="train").order_by("array_task_id")
    assert [t.array_task_id for t in tasks] == [0, 1, 2, 3]
    shapes = {(t.gpus_per_node, t.cpus_per_node, t.memory_mib_per_node, t.walltime_seconds, t.state) for t in tasks}
    assert shapes == {(2, 4, 16384, 3600, JobState.HELD)}  # the form's walltime over the script's


def test_a_directive_the_portal_does_not_apply_is_an_error_on_the_script(world):
    response = post(world.alice, script="#!/bin/bash\n#SBATCH --partition=gpu\ntrue\n")

    assert response.status_code == 200
    assert "--partition=gpu (#SBATCH line 2) is not supported" in response.context["form"].errors["script"][0]
    assert not Job.objects.exists()


def test_a_script_alone_names_pays_and_times_the_job_and_the_options_field_wins(world):
    """A Slurm user pastes a script and nothing else: its -J, -A and -t apply; the form's
    *Slurm options* are sbatch's command line, over the script's lines."""
    client = Client()
    client.force_login(world.alice)
    script = "#!/bin/bash\n#SBATCH -J resnet -A lab -t 2:00:00 --gres=gpu:2\npython3 train.py\n"
    response = client.post("/jobs/new/", {"script": script, "sbatch_options": "-t 30 -H"})

    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get()
    assert (job.name, job.account.name, job.walltime_seconds, job.gpus_per_node) == ("resnet", "lab", 1800, 2)
    assert job.state == JobState.HELD


def test_unreadable_slurm_options_are_an_error_on_their_field(world):
    client = Client()
    client.force_login(world.alice)
    response = client.post("/jobs/new/", {"name": "x", "command": "true", "sbatch_options": "-J 'unclosed"})
    assert "Cannot read the options" in response.context["form"].errors["sbatch_options"][0]
    assert not Job.objects.exists()


def test_a_script_s_output_files_apply_and_the_form_s_own_field_wins(world):
    script = "#!/bin/bash\n#SBATCH -o logs/%x-%j.out -e logs/%x-%j.err\npython3 train.py\n"

    response = post(world.alice, script=script, workdir="/home/alice/run", output_path="run-%j.out")

    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get()
    assert (job.output_path, job.error_path) == ("run-%j.out", "logs/%x-%j.err")


def test_an_output_file_a_job_may_not_write_is_an_error_under_its_field(world):
    response = post(world.alice, command="true", output_path="/etc/cron.d/evil")

    assert response.status_code == 200
    assert "may lie only under /home/alice" in response.context["form"].errors["output_path"][0]
    assert not Job.objects.exists()


def test_resubmit_as_copy_keeps_the_output_files(world):
    post(world.alice, command="true", output_path="out-%j.txt", error_path="err-%j.txt")
    client = Client()
    client.force_login(world.alice)

    form = client.get("/jobs/new/", {"copy": Job.objects.get().id}).context["form"]

    assert (form.initial["output_path"], form.initial["error_path"]) == ("out-%j.txt", "err-%j.txt")
