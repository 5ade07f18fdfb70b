"""The planner's bit and search helpers give the builtins' answers in both spellings:
the loops compiled code runs and the builtins interpreted code runs."""

from __future__ import annotations

import bisect

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core import bits

masks = st.integers(min_value=0, max_value=(1 << 130) - 1)  # beyond one machine word too
sorted_lists = st.lists(st.integers(min_value=-(1 << 62), max_value=1 << 62), max_size=40).map(sorted)
probes = st.integers(min_value=-(1 << 63), max_value=1 << 63)


@given(masks)
def test_popcount_counts_the_set_bits(mask: int) -> None:
    assert bits.popcount_loop(mask) == bits.popcount(mask) == mask.bit_count()


@given(sorted_lists, probes)
def test_bisect_right_is_the_index_after_the_last_value_not_above(values: list[int], x: int) -> None:
    expected = bisect.bisect_right(values, x)
    assert bits.bisect_right_loop(values, x) == bits.bisect_right(values, x) == expected


@given(sorted_lists, probes)
def test_bisect_left_is_the_index_of_the_first_value_not_below(values: list[int], x: int) -> None:
    expected = bisect.bisect_left(values, x)
    assert bits.bisect_left_loop(values, x) == bits.bisect_left(values, x) == expected


@given(sorted_lists)
def test_a_value_in_the_list_is_found_on_both_sides_of_its_run(values: list[int]) -> None:
    for x in values:
        left, right = bits.bisect_left_loop(values, x), bits.bisect_right_loop(values, x)
        assert values[left:right] == [x] * values.count(x)
