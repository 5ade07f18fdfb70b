"""How evenly accounts fared: bounded slowdowns, each account's mean, Jain's index over
the accounts and the worst account against everyone."""

from __future__ import annotations

import pytest

from scheduler.core.fairness import Fairness, account_fairness, bounded_slowdown


@pytest.mark.parametrize(
    ("jct_s", "run_s", "slowdown"),
    [(3600, 3600, 1.0), (7200, 3600, 2.0), (60, 1, 6.0), (5, 5, 1.0), (0, 0, 1.0)],
    ids=["never waited", "waited as long as it ran", "1 s run counts as 10 s", "short and prompt", "nothing"],
)
def test_bounded_slowdown(jct_s: float, run_s: float, slowdown: float) -> None:
    assert bounded_slowdown(jct_s, run_s) == pytest.approx(slowdown)


@pytest.mark.parametrize(
    ("jobs", "jain", "worst", "ratio"),
    [
        ([("a", 2.0), ("b", 2.0), ("c", 2.0)], 1.0, "c", 1.0),
        ([("a", 1.0), ("a", 3.0), ("b", 2.0)], 1.0, "b", 1.0),
        # means 1, 1, 4: (6)^2 / (3 * 18) = 2/3; everyone's mean 6/3 = 2, so c is at 2x
        ([("a", 1.0), ("b", 1.0), ("c", 4.0)], 2 / 3, "c", 2.0),
        # a's many prompt jobs do not hide c's one long wait: means 1 and 9, Jain 100/164;
        # the mean of all jobs is (9 + 9) / 10 = 1.8, c at 5x
        ([("a", 1.0)] * 9 + [("c", 9.0)], 100 / 164, "c", 5.0),
    ],
    ids=["all equal", "equal means of unequal jobs", "one starving", "one starving among many jobs"],
)
def test_jain_index_over_account_means(jobs: list[tuple[str, float]], jain: float, worst: str, ratio: float) -> None:
    fairness = account_fairness(jobs)
    assert fairness.jain == pytest.approx(jain)
    assert (fairness.worst_account, fairness.worst_ratio) == (worst, pytest.approx(ratio))
    assert fairness.jobs == len(jobs)


def test_no_jobs_is_fair_and_names_no_one() -> None:
    assert account_fairness([]) == Fairness({}, 1.0, None, 1.0, 0)


def test_accounts_are_in_name_order_with_their_means() -> None:
    assert account_fairness([("z", 3.0), ("a", 1.0), ("z", 1.0)]).accounts == {"a": 1.0, "z": 2.0}
