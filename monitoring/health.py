"""Health rules, pure: what a sample says about whether a GPU may take new jobs.

A GPU gets no new jobs while its newest sample shows it over the temperature threshold
or throttling for a power or thermal reason, and for ``xid_hold`` after a new XID error.
A critical XID (the GPU fell off the bus, double-bit ECC, row-remapping failure...) also
drains the node: that is ``services.record_health``'s job, decided here by ``is_critical``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: What the commonest XIDs mean (NVIDIA's XID catalogue), for reasons people read.
XID_MEANINGS = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    temperature_c: float = 85.0
    throttle_reasons: frozenset[str] = frozenset(
        {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"}
    )
    critical_xids: frozenset[int] = frozenset({48, 63, 64, 74, 79, 94, 95})
    xid_hold: timedelta = timedelta(hours=1)


def describe_xid(xid: int) -> str:
    meaning = XID_MEANINGS.get(xid)
    return f"XID {xid} ({meaning})" if meaning else f"XID {xid}"


def condition(sample: Mapping[str, Any], thresholds: Thresholds) -> str:
    """Why this sample's GPU should get no new jobs, or ``""`` if it is fine.

    Looks at ``temperature_c`` and ``throttle_reasons`` only; XIDs are events, kept
    separately (see :func:`is_unhealthy`).
    """
    reasons = []
    temperature = sample.get("temperature_c")
    if temperature is not None and temperature > thresholds.temperature_c:
        reasons.append(f"temperature {temperature:g} °C over the {thresholds.temperature_c:g} °C threshold")
    throttling = sorted(set(sample.get("throttle_reasons") or ()) & thresholds.throttle_reasons)
    if throttling:
        reasons.append(f"throttling ({', '.join(throttling)})")
    return "; ".join(reasons)


def is_new_xid(xid: int | None, previous: int | None) -> bool:
    """A sample's XID counts as new when it differs from the last one recorded: dcgm-exporter
    repeats the last XID in every scrape, so the same value again is not a new error."""
    return bool(xid) and xid != previous


def is_critical(xid: int | None, critical: Collection[int]) -> bool:
    return xid is not None and xid in critical


def is_unhealthy(condition_text: str, xid_at: datetime | None, now: datetime, thresholds: Thresholds) -> bool:
    return bool(condition_text) or (xid_at is not None and now - xid_at < thresholds.xid_hold)
