"""Validate one sample of an ingest batch, by hand rather than with a DRF serializer:
the ingest path takes tens of thousands of samples a second, and a serializer costs
more per sample than the database insert does. ``api/serializers.py`` documents the same
shape for the schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: field -> (minimum, maximum) for the numeric fields; the first two are required.
NUMBERS: dict[str, tuple[float, float]] = {
    "utilization_pct": (0, 100),
    "memory_used_mib": (0, 16 * 1024 * 1024),
    "memory_total_mib": (0, 16 * 1024 * 1024),
    "temperature_c": (-40, 150),
    "power_w": (0, 10_000),
    "power_limit_w": (0, 10_000),
    "sm_clock_mhz": (0, 10_000),
    "xid": (0, 1_000_000),
    "ecc_errors": (0, 2**31 - 1),
}
REQUIRED = ("at", "utilization_pct", "memory_used_mib")
INTEGERS = {"memory_used_mib", "memory_total_mib", "sm_clock_mhz", "xid", "ecc_errors"}
KNOWN = {*NUMBERS, "at", "index", "uuid", "throttle_reasons", "processes"}
MAX_PROCESSES = 256


@dataclass(slots=True)
class CleanSample:
    at: datetime
    index: int | None
    uuid: str
    values: dict[str, Any]


def validate_sample(raw: Any, *, now: datetime, oldest: datetime) -> tuple[CleanSample | None, dict[str, str]]:
    """``(sample, {})`` for a valid sample, ``(None, {field: message})`` otherwise.

    ``at`` must be an ISO 8601 time with a zone, not after ``now`` + 5 minutes (clock
    skew) nor before ``oldest`` (it would be pruned at once). The GPU is named by
    ``uuid`` or ``index`` (at least one). Unknown fields are errors, so a typo is seen.
    """
    if not isinstance(raw, dict):
        return None, {"non_field_errors": "A sample must be a JSON object."}
    errors: dict[str, str] = {}
    for name in REQUIRED:
        if raw.get(name) is None:
            errors[name] = "This field is required."
    for name in raw.keys() - KNOWN:
        errors[str(name)] = "Unknown field."
    at = _time(raw.get("at"), now, oldest, errors)
    index = raw.get("index")
    uuid = raw.get("uuid") or ""
    if index is not None and (type(index) is not int or index < 0):
        errors["index"] = "Must be a non-negative integer."
    if not isinstance(uuid, str) or len(uuid) > 64 or "\x00" in uuid:
        errors["uuid"] = "Must be a string of at most 64 characters (no NUL)."
    if index is None and not uuid:
        errors.setdefault("index", "Name the GPU by 'index' or 'uuid'.")
    values: dict[str, Any] = {}
    for name, (low, high) in NUMBERS.items():
        value = raw.get(name)
        if value is None:
            continue
        if type(value) not in (int, float) or (name in INTEGERS and type(value) is not int):
            errors[name] = "Must be an integer." if name in INTEGERS else "Must be a number."
        elif not low <= value <= high:
            errors[name] = f"Must be between {low:g} and {high:g}."
        else:
            values[name] = value
    reasons = raw.get("throttle_reasons")
    if reasons is not None:
        if not isinstance(reasons, list) or not all(
            isinstance(r, str) and len(r) <= 32 and "\x00" not in r for r in reasons
        ):
            errors["throttle_reasons"] = "Must be a list of short strings."
        else:
            values["throttle_reasons"] = reasons
    processes = raw.get("processes")
    if processes is not None:
        if not isinstance(processes, list) or len(processes) > MAX_PROCESSES or not all(_process(p) for p in processes):
            errors["processes"] = f'Must be a list (at most {MAX_PROCESSES}) of {{"pid": int, "used_memory_mib": int}}.'
        else:
            values["processes"] = processes
    if errors or at is None:
        return None, errors
    return CleanSample(at, index, uuid, values), {}


def _process(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.keys() <= {"pid", "used_memory_mib"}
        and type(item.get("pid")) is int
        and type(item.get("used_memory_mib", 0)) is int
    )


def _time(raw: Any, now: datetime, oldest: datetime, errors: dict[str, str]) -> datetime | None:
    if raw is None:
        return None
    try:
        at = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        at = None
    if at is None:
        errors["at"] = "Must be an ISO 8601 date-time, e.g. 2026-01-01T12:00:00Z."
    elif at.tzinfo is None:
        errors["at"] = "Must include a time zone (Z or +00:00)."
    elif at > now + timedelta(minutes=5):
        errors["at"] = "Is in the future; check the node's clock."
    elif at < oldest:
        errors["at"] = "Is older than the raw-sample retention."
    else:
        return at
    return None
