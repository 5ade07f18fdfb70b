"""Waiting for real processes without sleeping longer than needed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], *, timeout: float = 20.0, interval: float = 0.1, what: str = "condition"
) -> T:
    """Call ``probe`` until it returns something truthy; fail after ``timeout`` seconds.
    What it returns is that truthy value, so never ``None``: a probe that answers
    ``None`` for "not yet" gets back its value's own type."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)
