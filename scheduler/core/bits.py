"""Counting set bits and searching sorted int lists: the planner's innermost steps.

Each has two spellings, and the module picks the faster one for how it runs. Compiled
(see ``scheduler/core/compiled.py``), the plain loops below work on machine integers and
beat a call into CPython's builtins (``int.bit_count``, ``bisect``), which compiled code
can only reach through the generic call protocol. Interpreted, the builtins win by as
much, so an interpreted module swaps them in at import. Both give the same answers
(``tests/core/test_bits.py``). The searches count in ``i64`` (a plain ``int`` when
interpreted): compiled, indexing a list by a machine integer skips a conversion.
"""

from __future__ import annotations

import bisect

from mypy_extensions import i64


def popcount(mask: int) -> int:
    """How many bits of ``mask`` (>= 0) are set: the GPUs a mask holds."""
    count = 0
    while mask:
        mask &= mask - 1
        count += 1
    return count


def bisect_right(values: list[int], x: int) -> int:
    """As ``bisect.bisect_right``: the index after the last value <= ``x``."""
    lo: i64 = 0
    hi: i64 = len(values)
    while lo < hi:
        mid: i64 = (lo + hi) >> 1
        if x < values[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def bisect_left(values: list[int], x: int) -> int:
    """As ``bisect.bisect_left``: the index of the first value >= ``x``."""
    lo: i64 = 0
    hi: i64 = len(values)
    while lo < hi:
        mid: i64 = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: The loops as spelled here, whichever spelling the module exports (for the tests).
popcount_loop, bisect_right_loop, bisect_left_loop = popcount, bisect_right, bisect_left
#: Whether this module runs compiled (an extension module has no ``.py`` file).
COMPILED = not __file__.endswith(".py")
if not COMPILED:
    globals().update(popcount=int.bit_count, bisect_right=bisect.bisect_right, bisect_left=bisect.bisect_left)
