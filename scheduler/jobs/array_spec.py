"""Job array indices in Slurm's syntax: parsed from ``--array`` and written compactly.

``0-999``, ``1,3,5-7``, ``0-15:4`` (every 4th), each optionally ending ``%50`` (at
most 50 tasks run at once), as ``sbatch --array`` takes them; and the reverse, the
compact form ``squeue`` prints for a set of task indices (``42_[8-999]``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
#: Longest spec accepted (characters), as it is stored with every task.
MAX_SPEC_LENGTH = 1024


class ArraySpecError(ValueError):
    """What is wrong with a spec, in words for the submitter."""


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """Parsed ``--array``: the task indices (sorted, unique) and the throttle (0: none)."""

    indices: tuple[int, ...]
    throttle: int
    text: str

    @property
    def count(self) -> int:
        return len(self.indices)


def parse_array(text: str, *, max_size: int) -> ArraySpec:
    """``text`` as ``sbatch --array`` reads it. Indices run from 0 to ``max_size - 1``
    (Slurm's ``MaxArraySize``), so an array has at most ``max_size`` tasks. Raises
    :class:`ArraySpecError` saying what is wrong."""
    spec = text.strip()
    if not spec:
        raise ArraySpecError("Give the task indices, e.g. 0-99, 1,3,5-7, 0-15:4 or 0-999%50.")
    if len(spec) > MAX_SPEC_LENGTH:
        raise ArraySpecError(f"At most {MAX_SPEC_LENGTH} characters; use ranges (0-999) rather than lists.")
    body, percent, limit_text = spec.partition("%")
    throttle = 0
    if percent:
        if not limit_text.isascii() or not limit_text.isdigit() or int(limit_text) < 1:
            raise ArraySpecError(
                f"The throttle after % must be a whole number of tasks, at least 1 (got {limit_text!r})."
            )
        throttle = int(limit_text)
    indices: set[int] = set()
    for item in body.split(","):
        match = _ITEM.match(item.strip()) if item.isascii() else None
        if match is None:
            raise ArraySpecError(f"{item.strip()!r} is not an index, a range (0-9) or a range with a step (0-9:2).")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        step = int(match.group(3)) if match.group(3) is not None else 1
        if last < first:
            raise ArraySpecError(f"In {item.strip()!r} the range ends before it starts.")
        if step < 1:
            raise ArraySpecError(f"In {item.strip()!r} the step must be at least 1.")
        if last >= max_size:
            raise ArraySpecError(f"Task indices run from 0 to {max_size - 1} (the array size limit is {max_size}).")
        indices.update(range(first, last + 1, step))
    if len(indices) > max_size:  # not reachable while indices stay below max_size; kept explicit
        raise ArraySpecError(f"At most {max_size} tasks in one array.")
    return ArraySpec(tuple(sorted(indices)), throttle, spec)


def compact_indices(indices: Iterable[int]) -> str:
    """Sorted unique ``indices`` as ``squeue`` writes them: ``8-999``, ``1,3,5-7``,
    ``0-12:4`` (a run of three or more with one step)."""
    values = sorted(set(indices))
    parts: list[str] = []
    n, i = len(values), 0

    def starts_run(k: int) -> bool:  # a step-1 run reads best as a-b: never split one
        return k + 1 < n and values[k + 1] - values[k] == 1

    while i < n:
        j = i
        if starts_run(i):
            while starts_run(j):
                j += 1
            parts.append(f"{values[i]}-{values[j]}")
        else:
            step = values[i + 1] - values[i] if i + 1 < n else 0
            while j + 1 < n and values[j + 1] - values[j] == step and not starts_run(j + 1):
                j += 1
            if j - i >= 2:
                parts.append(f"{values[i]}-{values[j]}:{step}")
            else:
                j = i
                parts.append(str(values[i]))
        i = j + 1
    return ",".join(parts)


def task_label(array_job: int, indices: Iterable[int]) -> str:
    """``42_7`` for one task, ``42_[8-999]`` for several (``squeue``'s JOBID column)."""
    values = sorted(set(indices))
    if len(values) == 1:
        return f"{array_job}_{values[0]}"
    return f"{array_job}_[{compact_indices(values)}]"
