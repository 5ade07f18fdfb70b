"""One sample of an ingest batch: what is accepted as it is, and the message for each way
it can be wrong (``monitoring.ingest.validate_sample``; no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitoring.ingest import validate_sample

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OLDEST = NOW - timedelta(hours=48)
AT = "2026-03-01T11:59:50+00:00"
GOOD = {"index": 0, "at": AT, "utilization_pct": 50.0, "memory_used_mib": 1000}
PROCESSES_MESSAGE = (
    'Must be a list (at most 256) of {"pid": int, "used_memory_mib": int, "uid": int, '
    '"user": str (<= 32), "command": str (<= 64)}; pid required.'
)


def check(raw: Any) -> tuple[Any, dict[str, str]]:
    return validate_sample(raw, now=NOW, oldest=OLDEST)


@pytest.mark.parametrize(
    "fields,errors",
    [
        ({"utilization_pct": 130}, {"utilization_pct": "Must be between 0 and 100."}),
        ({"utilization_pct": -0.5}, {"utilization_pct": "Must be between 0 and 100."}),
        ({"utilization_pct": float("nan")}, {"utilization_pct": "Must be between 0 and 100."}),
        ({"temperature_c": -41}, {"temperature_c": "Must be between -40 and 150."}),
        ({"memory_used_mib": 1000.0}, {"memory_used_mib": "Must be an integer."}),
        ({"memory_used_mib": "1000"}, {"memory_used_mib": "Must be an integer."}),
        ({"sm_clock_mhz": True}, {"sm_clock_mhz": "Must be an integer."}),
        ({"power_w": "300"}, {"power_w": "Must be a number."}),
        ({"power_w": True}, {"power_w": "Must be a number."}),
        ({"ecc_errors": 2**31}, {"ecc_errors": "Must be between 0 and 2.14748e+09."}),
        ({"memory_used_mib": None}, {"memory_used_mib": "This field is required."}),
        (
            {"memory_used_mib": None, "at": None},
            {
                "memory_used_mib": "This field is required.",
                "at": "This field is required.",
            },
        ),
        ({"at": None}, {"at": "This field is required."}),
        ({"at": "yesterday"}, {"at": "Must be an ISO 8601 date-time, e.g. 2026-01-01T12:00:00Z."}),
        ({"at": 1767268800}, {"at": "Must be an ISO 8601 date-time, e.g. 2026-01-01T12:00:00Z."}),
        ({"at": "2026-03-01T11:59:50"}, {"at": "Must include a time zone (Z or +00:00)."}),
        ({"at": "2026-03-01T12:06:00Z"}, {"at": "Is in the future; check the node's clock."}),
        ({"at": "2026-02-27T11:59:59Z"}, {"at": "Is older than the raw-sample retention."}),
        ({"colour": "red"}, {"colour": "Unknown field."}),
        ({"colour": None}, {"colour": "Unknown field."}),
        ({"index": -1}, {"index": "Must be a non-negative integer."}),
        ({"index": 1.0}, {"index": "Must be a non-negative integer."}),
        ({"index": False}, {"index": "Must be a non-negative integer."}),
        ({"index": None}, {"index": "Name the GPU by 'index' or 'uuid'."}),
        ({"index": None, "uuid": ""}, {"index": "Name the GPU by 'index' or 'uuid'."}),
        ({"uuid": "G" * 65}, {"uuid": "Must be a string of at most 64 characters (no NUL)."}),
        ({"uuid": "GPU-\x00"}, {"uuid": "Must be a string of at most 64 characters (no NUL)."}),
        ({"uuid": 7}, {"uuid": "Must be a string of at most 64 characters (no NUL)."}),
        ({"throttle_reasons": "hw_slowdown"}, {"throttle_reasons": "Must be a list of short strings."}),
        ({"throttle_reasons": ["x" * 33]}, {"throttle_reasons": "Must be a list of short strings."}),
        ({"throttle_reasons": [1]}, {"throttle_reasons": "Must be a list of short strings."}),
        (
            {"processes": [{"pid": "1"}]},
            {"processes": PROCESSES_MESSAGE},
        ),
        (
            {"processes": [{"pid": 1, "name": "python"}]},
            {"processes": PROCESSES_MESSAGE},
        ),
        (
            {"processes": [{"pid": 1}] * 257},
            {"processes": PROCESSES_MESSAGE},
        ),
        ({"processes": [{"pid": 1, "uid": -1}]}, {"processes": PROCESSES_MESSAGE}),
        ({"processes": [{"pid": 1, "uid": "1001"}]}, {"processes": PROCESSES_MESSAGE}),
        ({"processes": [{"pid": 1, "user": "a" * 33}]}, {"processes": PROCESSES_MESSAGE}),
        ({"processes": [{"pid": 1, "command": "py\x00"}]}, {"processes": PROCESSES_MESSAGE}),
        (
            {"utilization_pct": 101, "at": "soon", "power_w": -1, "extra": 1},
            {
                "utilization_pct": "Must be between 0 and 100.",
                "at": "Must be an ISO 8601 date-time, e.g. 2026-01-01T12:00:00Z.",
                "power_w": "Must be between 0 and 10000.",
                "extra": "Unknown field.",
            },
        ),
    ],
    ids=[
        "utilization over 100",
        "utilization below 0",
        "utilization NaN",
        "colder than -40 C",
        "an integer field given a float",
        "an integer field given a string",
        "an integer field given a boolean",
        "a number given a string",
        "a number given a boolean",
        "ECC count past a 32-bit int",
        "a required field null",
        "two required fields null (utilization may be: MIG)",
        "no time",
        "a time that is not ISO 8601",
        "a time as a Unix timestamp",
        "a time without a zone",
        "a time past the 5 minutes of clock skew",
        "a time past the raw retention",
        "an unknown field",
        "an unknown field even when null",
        "a negative index",
        "an index given a float",
        "an index given a boolean",
        "no index and no uuid",
        "no index and an empty uuid",
        "a uuid too long",
        "a uuid with NUL",
        "a uuid that is not a string",
        "throttle reasons not a list",
        "a throttle reason too long",
        "a throttle reason not a string",
        "a process pid not an int",
        "a process with an unknown key",
        "too many processes",
        "a process owner's uid negative",
        "a process owner's uid not an int",
        "a process owner's name too long",
        "a process command with NUL",
        "every error of a sample at once",
    ],
)
def test_a_bad_sample_is_rejected_with_a_message_per_field(fields, errors):
    assert check(GOOD | fields) == (None, errors)


def test_a_sample_that_is_not_an_object_is_rejected():
    assert check([1, 2]) == (None, {"non_field_errors": "A sample must be a JSON object."})


def test_a_full_sample_keeps_every_reading():
    readings = {
        "utilization_pct": 99,
        "memory_used_mib": 40_000,
        "memory_total_mib": 81_559,
        "temperature_c": -3.5,
        "power_w": 650.5,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1980,
        "throttle_reasons": ["sw_power_cap"],
        "xid": 79,
        "ecc_errors": 0,
        "processes": [
            {"pid": 10},
            {"pid": 11, "used_memory_mib": 512, "uid": 1001, "user": "alice", "command": "python"},
        ],
    }
    sample, errors = check({"uuid": "GPU-1", "at": "2026-03-01T11:59:50.5Z", **readings})
    assert errors == {}
    assert sample.at == datetime(2026, 3, 1, 11, 59, 50, 500000, tzinfo=UTC)
    assert (sample.index, sample.uuid) == (None, "GPU-1")
    assert sample.values == readings


def test_null_optional_fields_are_absent_and_the_edges_of_each_range_are_valid():
    sample, errors = check(
        GOOD | {"utilization_pct": 100, "temperature_c": None, "processes": None, "at": "2026-03-01T12:05:00Z"}
    )
    assert errors == {}
    assert sample.values == {"utilization_pct": 100, "memory_used_mib": 1000}
    assert sample.at == NOW + timedelta(minutes=5)
    assert check(GOOD | {"at": OLDEST.isoformat()})[1] == {}
