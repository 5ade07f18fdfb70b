"""sbatch's ``--mail-type`` read as Slurm reads it: comma-separated types in any case,
NONE over every other, and each type with no message here refused by name, with why."""

from __future__ import annotations

import pytest

from scheduler.jobs.mail_type import APPLIED, REFUSED, mail_type_text, parse_mail_type


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("END", ["END"]),
        ("end,fail", ["END", "FAIL"]),
        ("FAIL, BEGIN ,END", ["BEGIN", "END", "FAIL"]),  # Slurm's order, whatever the order given
        ("END,END", ["END"]),
        ("ALL", ["ALL"]),
        ("ALL,ARRAY_TASKS", ["ALL", "ARRAY_TASKS"]),
        ("REQUEUE,TIME_LIMIT", ["REQUEUE", "TIME_LIMIT"]),
        ("NONE", []),
        ("END,NONE", []),  # "NONE will suppress all event notifications, ignoring any other values"
        (["BEGIN", "end"], ["BEGIN", "END"]),
        ([], None),
    ],
    ids=lambda value: repr(value),
)
def test_the_types_are_kept_in_slurms_order_once_each(given, stored):
    if stored is None:
        with pytest.raises(ValueError, match="give one or more of NONE, BEGIN"):
            parse_mail_type(given)
    else:
        assert parse_mail_type(given) == stored


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("TIME_LIMIT_90", "TIME_LIMIT_90 is not supported: the portal sends no warning before a job's time limit"),
        ("TIME_LIMIT_80", "TIME_LIMIT tells when it is reached"),
        ("time_limit_50", "TIME_LIMIT_50 is not supported"),
        ("INVALID_DEPEND", "waits, with the reason DependencyNeverSatisfied"),
        ("STAGE_OUT", "there are no burst buffers here"),
        ("END,BOGUS", "'BOGUS' is not a mail type: give NONE, BEGIN, END, FAIL"),
        ("NONE,BOGUS", "'BOGUS' is not a mail type"),  # refused, even beside NONE: never dropped
        ("END,,FAIL", "a type between commas is empty"),
        ("", "give one or more of"),
    ],
)
def test_a_type_with_no_message_here_is_refused_by_name(given, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        parse_mail_type(given)


def test_every_problem_is_told_at_once():
    with pytest.raises(ValueError) as refused:
        parse_mail_type("STAGE_OUT,BOGUS,TIME_LIMIT_90")
    assert [part.split(" ")[0] for part in str(refused.value).split("; ")] == ["STAGE_OUT", "'BOGUS'", "TIME_LIMIT_90"]


def test_every_type_of_slurm_is_applied_or_refused():
    slurms = {"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT"}
    slurms |= {"TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS"}
    assert slurms == {"NONE", *APPLIED, *REFUSED}


@pytest.mark.parametrize(("stored", "text"), [(None, ""), ([], "NONE"), (["END", "FAIL"], "END,FAIL")])
def test_a_jobs_choice_reads_as_sbatchs_value(stored, text):
    assert mail_type_text(stored) == text
    if stored is not None:
        assert parse_mail_type(text) == stored
