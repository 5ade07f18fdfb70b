"""An attempt's GPU time split by clock hour (``scheduler.core.hours``): what each hour's
rollup row gets from one attempt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core.hours import WAIT_BINS, HourShare, add_up, split_attempt, wait_bin

H = timedelta(hours=1)
T = datetime(2026, 3, 1, 10, tzinfo=UTC)  # an hour boundary
NO_WAIT = 0  # "< 1 min"


@pytest.mark.parametrize(
    "started, ended, gpus, expected",
    [
        pytest.param(
            T + timedelta(minutes=10),
            T + timedelta(minutes=40),
            2.0,
            [HourShare(T, 2 * 1800.0, 0, 1, NO_WAIT)],
            id="30 min within one hour: one row, 2 GPUs x 1,800 s",
        ),
        pytest.param(
            T + timedelta(minutes=30),
            T + 3 * H + timedelta(minutes=15),
            2.0,
            [
                HourShare(T, 2 * 1800.0, 0, 1, NO_WAIT),
                HourShare(T + H, 2 * 3600.0, 1, 0, None),
                HourShare(T + 2 * H, 2 * 3600.0, 1, 0, None),
                HourShare(T + 3 * H, 2 * 900.0, 1, 0, None),
            ],
            id="10:30-13:15 spans four hours; started in the first, carried into the rest",
        ),
        pytest.param(
            T,
            T + 2 * H,
            1.0,
            [HourShare(T, 3600.0, 0, 1, NO_WAIT), HourShare(T + H, 3600.0, 1, 0, None)],
            id="ending on an hour boundary adds nothing to the next hour",
        ),
        pytest.param(T, T + H, 0.5, [HourShare(T, 1800.0, 0, 1, NO_WAIT)], id="a half-GPU share counts half its time"),
        pytest.param(
            T + timedelta(minutes=5),
            T + timedelta(minutes=5),
            1.0,
            [HourShare(T, 0.0, 0, 0, NO_WAIT)],
            id="an attempt that ran no time adds its wait but is not counted as run",
        ),
    ],
)
def test_an_attempt_is_split_over_the_hours_it_spans(started, ended, gpus, expected):
    assert split_attempt(started, ended, gpus, submitted=started) == expected


@pytest.mark.parametrize(
    "wait, label",
    [
        (timedelta(seconds=-5), "< 1 min"),
        (timedelta(seconds=59), "< 1 min"),
        (timedelta(minutes=1), "1-5 min"),
        (timedelta(minutes=59), "15-60 min"),
        (timedelta(hours=23), "12-24 h"),
        (timedelta(days=3), "> 1 day"),
    ],
)
def test_waits_fall_in_the_bin_whose_upper_bound_they_are_under(wait, label):
    assert WAIT_BINS[wait_bin(wait)][1] == label


def test_adding_up_attempts_sums_each_key_and_hour():
    totals = add_up(
        [
            ("lab", T, T + 2 * H, 1.0, T - timedelta(minutes=3)),
            ("lab", T + timedelta(minutes=30), T + H, 4.0, T),
            ("other", T, T + H, 1.0, T),
        ]
    )
    lab = totals[("lab", T)]
    assert (lab.gpu_seconds, lab.started, lab.carried) == (3600.0 + 4 * 1800.0, 2, 0)
    assert lab.waited == [0, 1, 0, 1, 0, 0, 0, 0]  # waited 3 min and 30 min
    assert (totals[("lab", T + H)].carried, totals[("lab", T + H)].waited) == (1, None)
    assert totals[("other", T)].gpu_seconds == 3600.0
