"""A job's own output files (``sbatch -o/-e``): sbatch's patterns filled in for one job,
the patterns refused by name, and where a file may lie, checked as text."""

from __future__ import annotations

import pytest

from scheduler.jobs.output_paths import Names, expand, filled, pattern_problem, placement_problem

#: Job 42, "train", of alice: no array.
PLAIN = Names(job_id=42, name="train", user="alice")
#: Task 7 of array 40 (its first task's id), job 47.
TASK = Names(job_id=47, name="sweep", user="alice", array_job=40, array_task=7)


@pytest.mark.parametrize(
    ("path", "names", "expected"),
    [
        ("slurm-%j.out", PLAIN, "slurm-42.out"),
        ("%x-%j.log", PLAIN, "train-42.log"),
        ("/home/%u/logs/%x.out", PLAIN, "/home/alice/logs/train.out"),
        ("out-%A_%a.txt", TASK, "out-40_7.txt"),
        ("out-%j.txt", TASK, "out-47.txt"),
        ("out-%A.txt", PLAIN, "out-42.txt"),
        ("out-%a.txt", PLAIN, "out-4294967294.txt"),
        ("out-%4a-%5j.txt", TASK, "out-0007-00047.txt"),
        ("out-%3x.txt", PLAIN, "out-train.txt"),
        ("100%%-%j.txt", PLAIN, "100%-42.txt"),
        ("%%j", PLAIN, "%j"),
        ("out\\-%j.txt", PLAIN, "out-%j.txt"),
        ("plain.txt", PLAIN, "plain.txt"),
    ],
    ids=[
        "%j is the job's id",
        "%x is its name",
        "%u is the owner",
        "an array task: %A the array, %a the index",
        "an array task's %j is its own id",
        "no array: %A is the job's id",
        "no array: %a is Slurm's NO_VAL",
        "a digit pads numbers",
        "a digit does not pad a name",
        "%% is a %",
        "%%j is no pattern",
        "a backslash: taken as written",
        "no pattern",
    ],
)
def test_patterns_are_filled_in_as_sbatch_fills_them(path, names, expected):
    assert pattern_problem(path) is None
    assert expand(path, names) == expected


def test_a_name_is_put_in_as_one_path_component():
    assert expand("logs/%x.out", Names(1, "a/../b", "alice")) == "logs/a_.._b.out"
    assert expand("logs/%x/out", Names(1, "..", "alice")) == "logs/__/out"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("out-%N.txt", "One file per node (%N"),
        ("out-%n.txt", "One file per node (%n)"),
        ("out-%t.txt", "One file per task (%t)"),
        ("out-%s.txt", "Job steps (%s)"),
        ("out-%J.txt", "Job steps (%J"),
        ("out-%b.txt", "%b (the array index modulo 10)"),
        ("out-%z.txt", "%z is not a pattern"),
        ("out-%", "a % at the end is not a pattern"),
        ("out\x00.txt", "control characters"),
        ("out\n.txt", "control characters"),
        ("x" * 1025, "at most 1024 characters"),
        ("logs/", "names a directory"),
        ("logs/..", "names a directory"),
        ("   ", "Give a file path"),
    ],
)
def test_what_cannot_name_a_file_is_said(path, words):
    problem = pattern_problem(path)
    assert problem is not None and words in problem, problem


ROOTS = ("/home/alice", "/scratch/alice")
PORTAL = ("/home/alice/quartermaster/var",)


@pytest.mark.parametrize(
    ("path", "workdir", "words"),
    [
        ("/home/alice/logs/%j.out", "", None),
        ("/home/%u/logs/%j.out", "", None),
        ("/dev/null", "", None),
        ("out-%j.txt", "", None),
        ("logs/out-%j.txt", "/home/alice/run", None),
        ("../logs/out-%j.txt", "/home/alice/run", None),
        ("out-%j.txt", "/home/alice/run", None),
        ("/etc/cron.d/evil", "", "may lie only under /home/alice, /scratch/alice"),
        ("/home/bob/out.txt", "", "may lie only under"),
        ("/home/%u/../bob/out.txt", "", "'..', '.' or '//' parts"),
        ("../../bob/out.txt", "/home/alice/run", "/home/bob/out.txt does not"),
        ("/home/alice/quartermaster/var/db.sqlite3", "", "lies in the portal's own files"),
        ("logs/out.txt", "", "subdirectory of the job's own fresh directory"),
    ],
    ids=[
        "absolute under a root",
        "%u is the owner's root",
        "/dev/null is no file",
        "a name in the job's own directory",
        "relative to the workdir",
        "above the workdir, under a root",
        "in the workdir",
        "outside every root",
        "another user's home",
        "dot-dot parts",
        "relative, out of the roots",
        "the portal's var dir",
        "a subdirectory of a fresh directory",
    ],
)
def test_where_a_file_may_lie(path, workdir, words):
    problem = placement_problem(path, workdir=workdir, user="alice", roots=ROOTS, refused=PORTAL)
    if words is None:
        assert problem is None
    else:
        assert problem is not None and words in problem, problem


@pytest.mark.parametrize(
    ("path", "workdir", "expected"),
    [
        ("out-%j.txt", "/home/alice/run", "/home/alice/run/out-42.txt"),
        ("../logs/%x.txt", "/home/alice/run", "/home/alice/logs/train.txt"),
        ("out-%j.txt", "", "out-42.txt"),
        ("/dev/null", "/home/alice/run", ""),
        ("", "/home/alice/run", ""),
    ],
)
def test_a_job_s_file_is_filled_in_and_put_in_its_workdir(path, workdir, expected):
    assert filled(path, PLAIN, workdir) == expected
