"""Run-time predictions from ended jobs, and the priority factors that use them."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from scheduler.core.prediction import MIN_SAMPLES, USER_SAMPLES, RuntimePredictor, ratio_quantile
from scheduler.core.priority import (
    PriorityWeights,
    job_priority,
    shortness_factor,
    stretch_factor,
)
from tests.builders import T0, pending

H = 3600


def test_a_users_ratio_is_the_mean_of_their_last_two_ended_jobs() -> None:
    predictor = RuntimePredictor()
    predictor.observe("vision", "ana", H, 0.9 * H)
    predictor.observe("vision", "ana", 4 * H, 0.4 * H)  # ratio 0.1
    assert predictor.expected_s("vision", "ana", 10 * H) == pytest.approx(5 * H)  # (0.9 + 0.1) / 2
    predictor.observe("vision", "ana", H, 0.3 * H)
    assert predictor.ratios[("vision", "ana")] == pytest.approx(0.2)  # 0.9 has left the window


def test_a_user_with_no_history_gets_the_accounts_ratio_else_the_walltime() -> None:
    predictor = RuntimePredictor()
    predictor.observe("vision", "ana", H, 0.5 * H)
    assert predictor.expected_s("vision", "bo", 2 * H) == pytest.approx(H)
    assert predictor.expected_s("nlp", "cy", 2 * H) == 2 * H


def test_ratios_stay_between_0_and_1_and_a_zero_walltime_teaches_nothing() -> None:
    predictor = RuntimePredictor()
    predictor.observe("a", "u", H, 5 * H)  # killed at the limit
    predictor.observe("a", "u", 0, 10)
    assert predictor.ratios == {("a", ""): 1.0, ("a", "u"): 1.0}
    with pytest.raises(ValueError):
        RuntimePredictor(user_history=0)


def test_shortness_is_1_for_an_instant_job_0_from_the_horizon_and_log_scaled_between() -> None:
    week = 7 * 24 * H
    assert shortness_factor(0, week) == 1.0
    assert shortness_factor(week, week) == shortness_factor(2 * week, week) == 0.0
    one, four, sixteen = (shortness_factor(h * H, week) for h in (1, 4, 16))
    assert one > four > sixteen > 0
    assert one - four == pytest.approx(four - sixteen, rel=0.05)  # equal ratios, equal steps
    assert one == pytest.approx(1 - math.log1p(H) / math.log1p(week))


def test_stretch_grows_with_the_wait_over_target_times_the_walltime_up_to_1() -> None:
    assert stretch_factor(0, H, 2.0) == 0.0
    assert stretch_factor(H, H, 2.0) == 0.5
    assert stretch_factor(5 * H, H, 2.0) == 1.0
    assert stretch_factor(10, 0, 2.0) == 0.5  # walltimes count as at least 10 s


def test_a_short_job_outranks_a_long_one_until_the_long_one_has_waited_its_stretch() -> None:
    weights = PriorityWeights(age=0, fairshare=0, jobsize=0, qos=0, shortness=1000, stretch=1000, stretch_target=2)
    now = T0 + timedelta(hours=60)
    ratios = {("a", "u"): 0.25}  # this user's jobs run a quarter of their walltime: a "1 day" job, 6 h

    def priority(walltime_h: int, submitted_h: int):  # type: ignore[no-untyped-def]
        job = pending(1, age_rank=submitted_h * H, walltime_seconds=walltime_h * H, account="a", user="u")
        return job_priority(
            job, now=now, weights=weights, fairshare={}, qos_priorities={}, cluster_gpus=8, runtime_ratios=ratios
        )

    fresh_short, fresh_long, waited_long = priority(1, 60), priority(24, 60), priority(24, 0)
    assert fresh_short.stretch == fresh_long.stretch == 0
    assert fresh_short.total > fresh_long.total  # shorter (by 1 h x 0.25 against 6 h) first...
    assert waited_long.stretch == 1000  # ...until 60 h of waiting passed 2 x its 24 h walltime
    assert waited_long.total > fresh_short.total
    assert priority(24, 20).stretch == pytest.approx(1000 * 40 / 48)  # stretch counts walltimes, not predictions


def test_weights_refuse_a_negative_shortness_or_a_non_positive_stretch_target() -> None:
    with pytest.raises(ValueError, match="shortness"):
        PriorityWeights(shortness=-1)
    with pytest.raises(ValueError, match="stretch_target"):
        PriorityWeights(stretch_target=0)
    with pytest.raises(ValueError, match="shortness_horizon"):
        PriorityWeights(shortness_horizon=timedelta(0))


# --- Quantiles: what the p50 and p90 starts plan with ---------------------------------


def tenths(predictor: RuntimePredictor, account: str = "vision", user: str = "ana") -> RuntimePredictor:
    """``user`` ended ten 1-hour jobs that ran 0.1, 0.2, ... 1.0 of their walltime."""
    for tenth in range(1, 11):
        predictor.observe(account, user, H, tenth * H / 10)
    return predictor


@pytest.mark.parametrize(
    ("case", "q", "ran_s", "expected_s"),
    [
        ("the median is the nearest-rank middle ratio", 0.5, 0, 0.5 * H),
        ("the 90th percentile is the ninth of ten", 0.9, 0, 0.9 * H),
        ("the 100th percentile is the longest", 1.0, 0, H),
        ("a job that ran 3/4 of its hour runs the median of the ratios past 3/4", 0.5, 0.75 * H, 0.9 * H),
        ("a job past every ratio seen runs to its walltime", 0.5, 0.99 * H, H),
    ],
)
def test_a_quantile_is_a_ratio_that_happened_among_those_the_job_has_not_outrun(case, q, ran_s, expected_s) -> None:
    assert tenths(RuntimePredictor()).quantile_s("vision", "ana", H, q, ran_s) == pytest.approx(expected_s), case


def test_quantiles_rise_with_q_so_the_p50_is_never_past_the_p90() -> None:
    predictor = tenths(RuntimePredictor())
    quantiles = [predictor.quantile_s("vision", "ana", 4 * H, q / 20) for q in range(1, 21)]
    assert quantiles == sorted(quantiles) and quantiles[0] < quantiles[-1]


def test_a_user_with_few_ended_jobs_gets_the_accounts_quantiles_else_the_walltime() -> None:
    predictor = tenths(RuntimePredictor())
    for _ in range(MIN_SAMPLES - 1):
        predictor.observe("vision", "bo", H, H)  # too few to tell bo's spread
    # the account's 14 ratios: ana's ten tenths and bo's four full runs; the 7th is 0.7
    assert predictor.quantile_s("vision", "bo", H, 0.5) == pytest.approx(0.7 * H)
    assert predictor.quantile_s("nlp", "cy", 2 * H, 0.5) == 2 * H  # nothing known: the walltime


def test_quantiles_read_only_the_latest_samples() -> None:
    predictor = RuntimePredictor()
    for _ in range(USER_SAMPLES):
        predictor.observe("a", "u", H, H)  # long ago, full runs
    for _ in range(USER_SAMPLES):
        predictor.observe("a", "u", H, 0.1 * H)  # lately, a tenth
    assert predictor.samples[("a", "u")] == [pytest.approx(0.1)] * USER_SAMPLES
    assert predictor.quantile_s("a", "u", H, 0.9) == pytest.approx(0.1 * H)


@pytest.mark.parametrize("q", [0.0, -0.5, 1.5])
def test_a_quantile_outside_0_to_1_is_refused(q) -> None:
    with pytest.raises(ValueError, match="q must be in"):
        ratio_quantile({}, "a", "u", q)
