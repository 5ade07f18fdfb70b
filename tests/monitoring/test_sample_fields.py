"""One list of GPU sample fields (``monitoring.sample_fields.SAMPLE_FIELDS``) with their
units and bounds: each is a column of ``GpuSample`` (or names the GPU), is in the API's
schema with the same bounds, is held to those bounds by the ingest validator (a value
just outside each bound is refused, one on it accepted), is sent by the node agent, and
each charted one has its rollup columns.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import models
from drf_spectacular.generators import SchemaGenerator

from agent.collectors.base import Process, Reading
from monitoring.ingest import validate_sample
from monitoring.models import GpuRollup, GpuSample
from monitoring.sample_fields import CHART_METRICS, MEASUREMENTS, SAMPLE_FIELDS, SAMPLE_NAMES, SampleField
from monitoring.series import METRICS

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GOOD = {"index": 0, "at": (NOW - timedelta(seconds=10)).isoformat(), "memory_used_mib": 1000}
#: A step just past a bound: the next integer, or a little for a float.
STEP = {"integer": 1, "number": 0.001}

BOUNDED = [f for f in SAMPLE_FIELDS if f.kind in ("number", "integer") and (f.minimum, f.maximum) != (None, None)]


def check(raw: dict[str, Any]) -> dict[str, str]:
    return validate_sample(raw, now=NOW, oldest=NOW - timedelta(hours=48))[1]


def test_every_column_of_a_sample_is_on_the_list_and_the_rest_name_the_gpu():
    columns = {f.name: f for f in GpuSample._meta.concrete_fields if f.name not in ("id", "gpu")}
    assert list(columns) == [f.name for f in SAMPLE_FIELDS if f.stored]
    assert [f.name for f in SAMPLE_FIELDS if not f.stored] == ["index", "uuid"]  # they find GpuSample.gpu
    for f in SAMPLE_FIELDS:
        if not f.stored:
            continue
        column = columns[f.name]
        assert column.null == (not f.required and f.kind != "list"), f.name
        if f.kind in ("number", "integer"):
            assert isinstance(column, models.IntegerField) == (f.kind == "integer"), f.name
            assert f.minimum is not None and f.maximum is not None, f"{f.name}: a measurement needs both bounds"
            if isinstance(column, models.PositiveIntegerField):
                assert f.minimum >= 0, f.name


def test_the_schema_has_every_field_with_its_bounds():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    sample = schema["components"]["schemas"]["SampleRequest"]
    assert list(sample["properties"]) == list(SAMPLE_NAMES)
    assert set(sample["required"]) == {f.name for f in SAMPLE_FIELDS if f.required}
    for f in SAMPLE_FIELDS:
        shown = sample["properties"][f.name]
        if f.kind in ("number", "integer"):
            assert (shown.get("minimum"), shown.get("maximum")) == (f.minimum, f.maximum), f.name
            assert shown["type"] == f.kind, f.name
        if f.kind == "text":
            assert shown["maxLength"] == f.maximum, f.name
        assert bool(shown.get("nullable")) == f.nullable, f.name


@pytest.mark.parametrize("field", BOUNDED, ids=lambda f: f.name)
def test_the_validator_holds_each_bound(field: SampleField):
    step = STEP[field.kind]
    for bound, outside in ((field.minimum, -step), (field.maximum, step)):
        if bound is None:
            continue
        inside = int(bound) if field.kind == "integer" else bound
        assert check({**GOOD, field.name: inside}) == {}, (field.name, inside)
        problem = check({**GOOD, field.name: inside + outside})
        assert field.name in problem, (field.name, inside + outside)


def test_the_validator_takes_every_field_and_nothing_else():
    every = {
        **GOOD,
        "uuid": "GPU-1",
        **{f.name: f.minimum for f in MEASUREMENTS},
        "throttle_reasons": ["sw_power_cap"],
        "processes": [{"pid": 1, "used_memory_mib": 10}],
    }
    assert set(every) == set(SAMPLE_NAMES)
    assert check(every) == {}
    assert check({**GOOD, "fan_pct": 40}) == {"fan_pct": "Unknown field."}


def test_the_agent_sends_every_field_by_its_name():
    reading = Reading(
        index=0,
        utilization_pct=50.0,
        memory_used_mib=1000,
        uuid="GPU-1",
        memory_total_mib=81920,
        temperature_c=40.0,
        power_w=300.0,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        throttle_reasons=("sw_power_cap",),
        xid=0,
        ecc_errors=0,
        processes=(Process(pid=1, used_memory_mib=10, uid=1001, user="alice", command="python"),),
    )
    payload = reading.to_payload(NOW - timedelta(seconds=10))
    assert set(payload) == set(SAMPLE_NAMES)
    assert check(payload) == {}


def test_each_charted_field_is_a_measurement_with_rollup_columns():
    assert METRICS == CHART_METRICS and CHART_METRICS
    measured = {f.name for f in MEASUREMENTS}
    rollup_columns = {f.name for f in GpuRollup._meta.concrete_fields}
    for metric, column in CHART_METRICS.items():
        assert column in measured, metric
        assert {f"{metric}_min", f"{metric}_mean", f"{metric}_max"} <= rollup_columns, metric
