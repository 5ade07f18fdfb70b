"""The words for pending reasons: one table, complete, read the same everywhere."""

from __future__ import annotations

import pytest

from scheduler.core.reason_words import REASON_WORDS, ReasonWords, reason_words
from scheduler.core.types import PendingReason


def test_every_pending_reason_has_words_and_nothing_else_does() -> None:
    assert set(REASON_WORDS) == set(PendingReason)


@pytest.mark.parametrize("reason", list(PendingReason), ids=str)
def test_each_reason_has_a_title_and_a_full_sentence(reason: PendingReason) -> None:
    words = REASON_WORDS[reason]
    assert words.title and words.title[0].isupper() and not words.title.endswith(".")
    assert words.sentence[0].isupper() and words.sentence.endswith(".")


@pytest.mark.parametrize("reason", list(PendingReason), ids=str)
def test_a_stored_code_reads_as_its_reason(reason: PendingReason) -> None:
    assert reason_words(str(reason)) is REASON_WORDS[reason]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(
            "QOSMaxJobsPerUser",
            ReasonWords("QOSMaxJobsPerUser", "It waits (QOSMaxJobsPerUser)."),
            id="unknown code reads as itself",
        ),
        pytest.param("", ReasonWords("", ""), id="no reason, no words"),
    ],
)
def test_a_code_this_version_does_not_know_never_raises(code: str, expected: ReasonWords) -> None:
    assert reason_words(code) == expected


def test_no_sentence_addresses_the_reader_it_may_be_about_someone_else() -> None:
    # The same sentence answers a what-if (asked by the owner) and explains a stored job
    # (shown to an admin or an account member), so it cannot say "you".
    assert not [r for r, w in REASON_WORDS.items() if "you" in w.sentence.lower().split()]
