"""Validate one sample of an ingest batch, by hand rather than with a DRF serializer:
the ingest path takes tens of thousands of samples a second, and a serializer costs
more per sample than the database insert does. ``api/serializers.py`` documents the same
shape for the schema; both take the fields and their bounds from
``monitoring.sample_fields``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from common.nul import has_nul
from monitoring.sample_fields import MAX_THROTTLE_REASON, MEASUREMENTS, SAMPLE_FIELDS, sample_field

#: field -> (minimum, maximum) of the measurements (``monitoring.sample_fields``);
#: memory_used_mib is required, and utilization_pct may be absent or null (a MIG-enabled
#: GPU: NVML does not report it).
NUMBERS: dict[str, tuple[float, float]] = {
    f.name: (f.minimum, f.maximum) for f in MEASUREMENTS if f.minimum is not None and f.maximum is not None
}
REQUIRED = tuple(f.name for f in SAMPLE_FIELDS if f.required)
INTEGERS = {f.name for f in MEASUREMENTS if f.kind == "integer"}
MAX_PROCESSES = int(sample_field("processes").maximum or 0)
MAX_UUID = int(sample_field("uuid").maximum or 0)
#: The longest process owner name (POSIX: 32) and command name (Linux's comm is 15) taken.
MAX_PROCESS_USER = 32
MAX_PROCESS_COMMAND = 64
_PROCESSES_MESSAGE = (
    f'Must be a list (at most {MAX_PROCESSES}) of {{"pid": int, "used_memory_mib": int, "uid": int, '
    f'"user": str (<= {MAX_PROCESS_USER}), "command": str (<= {MAX_PROCESS_COMMAND})}}; pid required.'
)
_UUID_MESSAGE = f"Must be a string of at most {MAX_UUID} characters (no NUL)."

#: field -> (types accepted, minimum, maximum, wrong-type message, out-of-range message),
#: worked out once. ``bool`` is not accepted where ``int`` is.
_NUMBER_RULES: dict[str, tuple[tuple[type, ...], float, float, str, str]] = {
    name: (
        (int,) if name in INTEGERS else (int, float),
        low,
        high,
        "Must be an integer." if name in INTEGERS else "Must be a number.",
        f"Must be between {low:g} and {high:g}.",
    )
    for name, (low, high) in NUMBERS.items()
}


@dataclass(slots=True)
class CleanSample:
    at: datetime
    index: int | None
    uuid: str
    values: dict[str, Any]


# A hot loop, kept in one pass: once per sample of every batch (benchmarks/ingest.py).
def validate_sample(raw: Any, *, now: datetime, oldest: datetime) -> tuple[CleanSample | None, dict[str, str]]:  # noqa: C901
    """``(sample, {})`` for a valid sample, ``(None, {field: message})`` otherwise.

    ``at`` must be an ISO 8601 time with a zone, not after ``now`` + 5 minutes (clock
    skew) nor before ``oldest`` (it would be pruned at once). The GPU is named by
    ``uuid`` or ``index`` (at least one). A known field that is ``null`` counts as
    absent; unknown fields are errors, so a typo is seen.

    One pass over the sample's own fields (it runs for every sample of every batch).
    """
    if not isinstance(raw, dict):
        return None, {"non_field_errors": "A sample must be a JSON object."}
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    at: datetime | None = None
    index: Any = None
    uuid: Any = ""
    for name, value in raw.items():
        rule = _NUMBER_RULES.get(name)
        if rule is not None:
            if value is not None:
                kinds, low, high, wrong_type, out_of_range = rule
                if type(value) not in kinds:
                    errors[name] = wrong_type
                elif low <= value <= high:
                    values[name] = value
                else:
                    errors[name] = out_of_range  # also NaN, which compares false
        elif name == "at":
            at = _time(value, now, oldest, errors)
        elif name == "index":
            index = value
            if index is not None and (type(index) is not int or index < 0):
                errors["index"] = "Must be a non-negative integer."
        elif name == "uuid":
            uuid = value or ""
            if not isinstance(uuid, str) or len(uuid) > MAX_UUID or has_nul(uuid):
                errors["uuid"] = _UUID_MESSAGE
        elif name == "throttle_reasons":
            if value is not None:
                if isinstance(value, list) and all(
                    isinstance(r, str) and len(r) <= MAX_THROTTLE_REASON and not has_nul(r) for r in value
                ):
                    values[name] = value
                else:
                    errors[name] = "Must be a list of short strings."
        elif name == "processes":
            if value is not None:
                if isinstance(value, list) and len(value) <= MAX_PROCESSES and all(map(_process, value)):
                    values[name] = value
                else:
                    errors[name] = _PROCESSES_MESSAGE
        else:
            errors[str(name)] = "Unknown field."
    if at is None or "memory_used_mib" not in values:
        for name in REQUIRED:
            if raw.get(name) is None:
                errors[name] = "This field is required."
    if index is None and not uuid:
        errors.setdefault("index", "Name the GPU by 'index' or 'uuid'.")
    if errors or at is None:
        return None, errors
    return CleanSample(at, index, uuid, values), {}


_PROCESS_KEYS = frozenset({"pid", "used_memory_mib", "uid", "user", "command"})


def _process(item: Any) -> bool:
    """A process of a sample: ``pid`` and what the agent knows of it (memory, its owner's
    ``uid`` and ``user``, its ``command`` name), each optional but ``pid``."""
    return (
        isinstance(item, dict)
        and item.keys() <= _PROCESS_KEYS
        and type(item.get("pid")) is int
        and type(item.get("used_memory_mib", 0)) is int
        and type(item.get("uid", 0)) is int
        and item.get("uid", 0) >= 0
        and _short_text(item.get("user", ""), MAX_PROCESS_USER)
        and _short_text(item.get("command", ""), MAX_PROCESS_COMMAND)
    )


def _short_text(value: Any, longest: int) -> bool:
    return isinstance(value, str) and len(value) <= longest and not has_nul(value)


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
