"""The fields of one GPU sample, as ``POST /api/v1/monitoring/samples/`` takes them: the
one list, with each field's unit and bounds. The hand-written validator
(``monitoring.ingest``), the schema's serializer (``monitoring.api.serializers``), the
bulk insert and the rollups (``monitoring.services``) and the charts
(``monitoring.series``) read it. ``tests/monitoring/test_sample_fields.py`` holds it to
the ``GpuSample`` model, to those places and to the node agent's payload (the agent is a
program of its own that imports nothing of the portal, so it keeps its own names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``number``: int or float; ``integer``: int only; ``time``: ISO 8601 with a zone;
#: ``text``: a string of at most ``maximum`` characters; ``list``: a JSON list.
Kind = Literal["number", "integer", "time", "text", "list"]


@dataclass(frozen=True, slots=True)
class SampleField:
    """One field of a sample."""

    name: str
    kind: Kind
    #: The unit of a number ("" for none).
    unit: str = ""
    #: Bounds of a number, both included (``None``: unbounded); ``maximum`` of a text is
    #: its length, of a list its items.
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False
    #: What it means, for the schema.
    meaning: str = ""
    #: ``null`` is documented as "not reported" (every optional field takes ``null`` as absent).
    nullable: bool = False
    #: A column of ``GpuSample`` (``index`` and ``uuid`` name the GPU, ``GpuSample.gpu``).
    stored: bool = True
    #: The chart metric that plots it (``monitoring.series``; "" none): the rollups keep
    #: its min, mean and max (``MetricBands``).
    chart: str = ""


#: The most MiB of memory a GPU may report (16 TiB).
MAX_MIB = 16 * 1024 * 1024

SAMPLE_FIELDS: tuple[SampleField, ...] = (
    SampleField("at", "time", required=True, meaning="When it was read, with a time zone."),
    SampleField("index", "integer", minimum=0, stored=False, meaning="The GPU's index on the node."),
    SampleField("uuid", "text", maximum=64, stored=False, meaning="The GPU's UUID; preferred over index."),
    SampleField(
        "utilization_pct",
        "number",
        "%",
        0,
        100,
        meaning="null or absent: not reported (MIG).",
        nullable=True,
        chart="utilization",
    ),
    SampleField("memory_used_mib", "integer", "MiB", 0, MAX_MIB, required=True, chart="memory_used"),
    SampleField("memory_total_mib", "integer", "MiB", 0, MAX_MIB),
    SampleField("temperature_c", "number", "°C", -40, 150, chart="temperature"),
    SampleField("power_w", "number", "W", 0, 10_000, chart="power"),
    SampleField("power_limit_w", "number", "W", 0, 10_000),
    SampleField("sm_clock_mhz", "integer", "MHz", 0, 10_000),
    SampleField("throttle_reasons", "list", meaning='Active clock throttle reasons, e.g. ["sw_power_cap"].'),
    SampleField("xid", "integer", "", 0, 1_000_000, meaning="An XID error seen since the last sample."),
    SampleField("ecc_errors", "integer", "errors", 0, 2**31 - 1),
    SampleField(
        "processes",
        "list",
        maximum=256,
        meaning='[{"pid": 1, "used_memory_mib": 10, "uid": 1001, "user": "alice", "command": "python"}]: '
        "the owner and command where the agent could read them (the GPU process audit).",
    ),
)

#: Every field's name.
SAMPLE_NAMES: tuple[str, ...] = tuple(f.name for f in SAMPLE_FIELDS)
#: The measurements: the stored numbers, each with both bounds.
MEASUREMENTS: tuple[SampleField, ...] = tuple(f for f in SAMPLE_FIELDS if f.stored and f.kind in ("number", "integer"))
#: The stored JSON lists (``[]`` when absent).
LISTS: tuple[str, ...] = tuple(f.name for f in SAMPLE_FIELDS if f.stored and f.kind == "list")
#: Chart metric -> the sample column it plots.
CHART_METRICS: dict[str, str] = {f.chart: f.name for f in SAMPLE_FIELDS if f.chart}
#: The longest throttle reason name.
MAX_THROTTLE_REASON = 32

_BY_NAME = {f.name: f for f in SAMPLE_FIELDS}


def sample_field(name: str) -> SampleField:
    """The field called ``name``. Raises ``KeyError`` for a name that is not a field."""
    return _BY_NAME[name]
