"""``qm sbatch SCRIPT [ARGS]`` and sbatch's spellings on ``qm submit``, against a live
server: the script's ``#SBATCH`` lines and the options are read by the portal, options
winning; what the portal refuses is exit 2, naming the option."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from people.services import create_api_token
from qm.cli import main
from qm.sbatch import FLAGS, split_words
from scheduler.choices import JobState
from scheduler.jobs.sbatch import flag_names
from scheduler.models import Job
from tests.builders import join, make_account
from tests.scheduler.api.test_sbatch_scripts import ISSUE_SCRIPT


@pytest.fixture
def qm(transactional_db, live_server, world):
    _, secret = create_api_token(world.alice, "cli")

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["--url", live_server.url, "--token", secret, *argv], out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    return run


@pytest.fixture
def script(tmp_path: Path):
    def write(text: str, name: str = "job.sh") -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


def test_sbatch_runs_the_issue_s_script_as_written(qm, world, script):
    join(world.alice, make_account("vision"))

    code, out, err = qm("sbatch", script(ISSUE_SCRIPT))

    assert code == 0, err
    tasks = Job.objects.filter(name="resnet").order_by("array_task_id")
    assert out == f"Submitted batch job {tasks[0].id}\n"
    assert [(t.array_task_id, t.gpus_per_node, t.walltime_seconds, t.cpus_per_node) for t in tasks] == [
        (i, 2, 3600, 4) for i in range(4)
    ]
    assert {(t.memory_mib_per_node, t.account.name) for t in tasks} == {(16384, "vision")}


def test_options_before_the_script_win_and_words_after_it_are_its_arguments(qm, script):
    path = script('#!/bin/bash\n#SBATCH -J from-script -t 10 --gres=gpu:2\necho "$1"\n')

    code, out, err = qm("sbatch", "-t", "5", "--gres=gpu:1", "--parsable", path, "a b", "-x")

    assert code == 0, err
    job = Job.objects.get()
    assert out == f"{job.id}\n"
    assert (job.name, job.walltime_seconds, job.gpus_per_node) == ("from-script", 300, 1)
    assert "set -- 'a b' -x\necho \"$1\"" in job.script


def test_a_script_without_a_job_name_is_named_after_its_file_as_sbatch_names_it(qm, script):
    unnamed = script("#!/bin/bash\n#SBATCH -t 10\ntrue\n", name="train-resnet.sbatch")
    named = script("#!/bin/bash\n#SBATCH -t 10 -J from-script\ntrue\n", name="other.sh")

    assert qm("sbatch", unnamed)[0] == 0 and qm("sbatch", named)[0] == 0
    assert qm("sbatch", "-J", "from-options", unnamed)[0] == 0

    assert list(Job.objects.order_by("id").values_list("name", flat=True)) == [
        "train-resnet.sbatch",
        "from-script",
        "from-options",
    ]


def test_sbatch_hold_and_wrap(qm):
    code, _, err = qm("sbatch", "-H", "-t", "1:00", "--wrap", "echo hi")

    assert code == 0, err
    job = Job.objects.get()
    assert (job.name, job.command, job.state, job.walltime_seconds) == ("wrap", "echo hi", JobState.HELD, 60)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--partition=gpu"], "sbatch_options: --partition=gpu is not supported: there are no partitions here"),
        (["--signal=USR1"], "--signal=USR1 is not an sbatch option the portal applies"),
    ],
)
def test_an_option_the_portal_refuses_is_exit_2_naming_it(qm, script, argv, words):
    code, _, err = qm("sbatch", *argv, script("#!/bin/bash\n#SBATCH -t 5\ntrue\n"))

    assert code == 2 and words in err
    assert not Job.objects.exists()


def test_a_refused_directive_in_the_script_is_exit_2_naming_its_line(qm, script):
    code, _, err = qm("sbatch", script("#!/bin/bash\n#SBATCH -t 5\n#SBATCH --exclusive\ntrue\n"))

    assert code == 2 and "script: --exclusive (#SBATCH line 3) is not supported" in err
    assert "jobs share nodes" in err


def test_a_scripts_mail_type_is_the_jobs_and_one_the_portal_refuses_is_exit_1_naming_it(qm, script):
    code, _, err = qm("sbatch", "--mail-type=FAIL", script("#!/bin/bash\n#SBATCH -t 5 --mail-type=END\ntrue\n"))

    assert code == 0, err
    assert Job.objects.get().mail_events == ["FAIL"]  # the command line's, over the script's
    code, out, _ = qm("show", str(Job.objects.get().id))
    assert code == 0 and "  mail type FAIL\n" in out
    code, _, err = qm("sbatch", script("#!/bin/bash\n#SBATCH -t 5\n#SBATCH --mail-type=TIME_LIMIT_80\ntrue\n"))
    assert code == 1 and "mail_type: --mail-type=TIME_LIMIT_80 (#SBATCH line 3): TIME_LIMIT_80 is not supp" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [([], "give a script to run"), (["-t", "5", "/nonexistent/job.sh"], "cannot read the script")],
)
def test_sbatch_without_a_readable_script_is_bad_usage(qm, argv, words):
    code, _, err = qm("sbatch", *argv)
    assert code == 2 and words in err


def test_submit_takes_sbatch_s_spellings(qm):
    code, _, err = qm(
        "submit", "-J", "spelt", "--time", "1-00", "--gres", "gpu:L4:2", "--mem", "16G", "-c", "4", "-H",
        "--", "python3", "train.py",
    )  # fmt: skip
    assert code == 0, err
    job = Job.objects.get()
    shape = (job.name, job.walltime_seconds, job.gpus_per_node, job.gpu_model, job.memory_mib_per_node)
    assert shape == ("spelt", 86400, 2, "L4", 16384)
    assert (job.cpus_per_node, job.state) == (4, JobState.HELD)


def test_sbatch_applies_output_and_error_files_the_command_line_over_the_script(qm, script):
    path = script("#!/bin/bash\n#SBATCH -t 5 -o script-%j.out\n#SBATCH -e logs-%x/%j.err\ntrue\n")

    code, _, err = qm("sbatch", "-o", "run-%j.out", "-D", "/home/alice/run", path)

    assert code == 0, err
    assert (Job.objects.get().output_path, Job.objects.get().error_path) == ("run-%j.out", "logs-%x/%j.err")


@pytest.mark.parametrize(
    ("argv", "directives", "words"),
    [
        (["-o", "/etc/passwd"], "", "output_path: -o /etc/passwd: A job's files may lie only under /home/alice"),
        ([], " -e err-%N.log", "error_path: -e err-%N.log (#SBATCH line 2): One file per node (%N"),
    ],
    ids=["outside the roots", "a pattern of one file per node"],
)
def test_an_output_file_a_job_may_not_write_is_refused_naming_the_option(qm, script, argv, directives, words):
    code, _, err = qm("sbatch", *argv, script(f"#!/bin/bash\n#SBATCH -t 5{directives}\ntrue\n"))

    assert code == 1 and words in err
    assert not Job.objects.exists()


def test_submit_takes_sbatch_s_output_and_error_files(qm):
    code, _, err = qm("submit", "-t", "10", "-o", "out-%j.log", "--error", "err-%j.log", "-e", "A=1", "--", "true")

    assert code == 0, err
    job = Job.objects.get()
    assert (job.output_path, job.error_path, job.env) == ("out-%j.log", "err-%j.log", {"A": "1"})


def test_submit_s_time_is_sbatch_s_minutes_and_the_script_s_name_is_kept(qm, script):
    code, _, err = qm("submit", "-t", "90", "--script", script("#!/bin/bash\n#SBATCH -J named-in-script\ntrue\n"))

    assert code == 0, err
    assert (Job.objects.get().name, Job.objects.get().walltime_seconds) == ("named-in-script", 5400)


def test_submit_refuses_a_slurm_spelling_the_portal_does_not_apply_with_exit_2(qm):
    code, _, err = qm("submit", "-t", "10", "-p", "gpu", "--", "true")
    assert code == 2 and "-p gpu is not supported" in err


def test_qm_finds_the_script_with_the_portal_s_own_flags():
    assert flag_names() == FLAGS
    assert split_words(["-t", "5", "--nice", "-H", "--mem=4G", "-Jx", "job.sh", "-t", "9"]) == (
        ["-t", "5", "--nice", "-H", "--mem=4G", "-Jx"],
        ["job.sh", "-t", "9"],
    )


def test_the_issue_s_submit_keeps_every_directive_of_its_script(qm, world, script):
    """``qm submit -t 1h --script`` ran as 1 GPU, no array, name "script", account lab."""
    join(world.alice, make_account("vision"))

    code, out, err = qm("submit", "-t", "1h", "--script", script(ISSUE_SCRIPT))

    assert code == 0, err
    tasks = Job.objects.order_by("array_task_id")
    assert out == f"Submitted array job {tasks[0].id} (resnet): 4 tasks\n"
    assert {(t.name, t.gpus_per_node, t.walltime_seconds, t.account.name) for t in tasks} == {
        ("resnet", 2, 3600, "vision")
    }
