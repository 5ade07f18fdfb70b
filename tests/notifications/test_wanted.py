"""The one rule for whether a message is made (``notifications.wanted``): a job's own
``--mail-type`` stands for its owner's choice of the events Slurm's types name (its
start, its end, its requeues), with Slurm's meanings; every other event, and every job
that chose nothing, is the owner's choice."""

from __future__ import annotations

import pytest

from notifications.models import STAFF_EVENTS, Event, default_events, defaults_for
from notifications.wanted import COVERS, told_of, wanted
from scheduler.choices import JobState
from scheduler.jobs.mail_type import APPLIED

STARTED, ENDED, PREEMPTED = Event.STARTED, Event.ENDED, Event.PREEMPTED
EVERYTHING = [e.value for e in Event]
COMPLETED, FAILED, TIMEOUT = {JobState.COMPLETED}, {JobState.FAILED}, {JobState.TIMEOUT}
NODE_FAIL, CANCELLED = {JobState.NODE_FAIL}, {JobState.CANCELLED}


@pytest.mark.parametrize(
    ("mail_types", "event", "ended", "told"),
    [
        (["END"], ENDED, COMPLETED, True),
        (["END"], STARTED, (), False),
        (["END"], ENDED, CANCELLED, True),  # Slurm mails END for a cancellation
        (["BEGIN"], STARTED, (), True),
        (["BEGIN"], ENDED, FAILED, False),
        (["FAIL"], ENDED, FAILED, True),
        (["FAIL"], ENDED, TIMEOUT, True),
        (["FAIL"], ENDED, NODE_FAIL, True),
        (["FAIL"], ENDED, COMPLETED, False),
        (["FAIL"], ENDED, CANCELLED, False),  # cancelled is not a failure to Slurm
        (["FAIL"], ENDED, {JobState.COMPLETED, JobState.FAILED}, True),  # an array with a failed task
        (["TIME_LIMIT"], ENDED, TIMEOUT, True),
        (["TIME_LIMIT"], ENDED, FAILED, False),
        (["REQUEUE"], PREEMPTED, (), True),
        (["REQUEUE"], STARTED, (), False),
        (["ALL"], STARTED, (), True),
        (["ALL"], ENDED, COMPLETED, True),
        (["ALL"], PREEMPTED, (), True),
        (["ARRAY_TASKS"], STARTED, (), False),  # how an array is told, not what
        ([], STARTED, (), False),  # NONE
        ([], ENDED, FAILED, False),
        ([], PREEMPTED, (), False),
    ],
    ids=lambda value: str(value),
)
def test_a_jobs_mail_types_stand_for_its_owners_choice_of_its_start_end_and_requeues(mail_types, event, ended, told):
    assert wanted(event, EVERYTHING, mail_types=mail_types, ended=ended) is told
    assert wanted(event, [], mail_types=mail_types, ended=ended) is told  # whatever the owner chose


@pytest.mark.parametrize("event", [Event.HELD, Event.IDLE, Event.ESTIMATE_MOVED, Event.QUOTA_NEAR])
@pytest.mark.parametrize("mail_types", [["END"], [], ["ALL"]], ids=["END", "NONE", "ALL"])
def test_events_no_mail_type_names_stay_the_owners_choice(event, mail_types):
    assert wanted(event, [event], mail_types=mail_types)
    assert not wanted(event, [], mail_types=mail_types)


@pytest.mark.parametrize("event", EVERYTHING)
def test_a_job_that_chose_nothing_is_told_as_its_owner_chose(event):
    assert wanted(event, default_events(), ended=FAILED) is (event in default_events())
    assert wanted(event, [event], mail_types=None)


@pytest.mark.parametrize("event", sorted(STAFF_EVENTS))
def test_notices_to_staff_are_on_for_staff_until_they_untick_them(event):
    assert wanted(event, defaults_for(staff=True))
    assert not wanted(event, defaults_for(staff=False))
    assert not wanted(event, default_events(), mail_types=["ALL"])


def test_every_type_the_portal_applies_says_what_it_asks_for():
    assert set(COVERS) == set(APPLIED)


@pytest.mark.parametrize(
    ("mail_types", "words"),
    [
        (None, ""),
        ([], "no message of its start, end or requeue"),
        (["ARRAY_TASKS"], "no message of its start, end or requeue"),
        (["BEGIN", "FAIL"], "a message of its start, an end that failed"),
        (["END", "ARRAY_TASKS"], "a message of any end; for each task of its array apart"),
    ],
)
def test_a_jobs_page_says_what_its_types_make(mail_types, words):
    assert told_of(mail_types) == words
