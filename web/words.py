"""Plain words for codes and durations on the pages."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from common.labels import field_label
from scheduler.core.reason_words import reason_words


def blocker_title(code: str) -> str:
    """The heading of a blocker (``scheduler.core.reason_words``); the stored message,
    the sentence with the figures, is shown under it. An unknown code reads as itself."""
    return reason_words(code).title


def evidence_items(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """Evidence as ``(label, value)`` pairs: ``used_gpus`` -> ``used GPUs``."""
    return [(field_label(str(key)), _value(value)) for key, value in sorted(evidence.items())]


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_value(v)}" for k, v in value.items())
    return str(value)


def about(seconds: float) -> str:
    """``about 40 min``, ``about 3 h``, ``about 2 days``; ``now`` under a minute."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return "now"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    if seconds < 36 * 3600:
        return f"about {round(seconds / 3600)} h"
    return f"about {round(seconds / 86400)} days"


def starts_in(at: datetime | None, now: datetime) -> str:
    if at is None:
        return ""
    return "now" if at <= now else "in " + about((at - now).total_seconds())


def queue_position(jobs_ahead: int | None, gpu_hours_ahead: float | None) -> str:
    """A waiting job's place in line (``scheduler.reads.positions``): ``next in line``,
    ``3 jobs ahead (12.5 GPU-hours)``; ``""`` for none."""
    if jobs_ahead is None:
        return ""
    if not jobs_ahead:
        return "next in line"
    hours = gpu_hours_ahead or 0.0
    amount = f"{hours:,.0f}" if hours >= 100 else f"{hours:.1f}".removesuffix(".0")
    return f"{jobs_ahead:,} job{'s' if jobs_ahead > 1 else ''} ahead ({amount} GPU-hours)"


def signed(value: float) -> str:
    """``+5``, ``-5`` (with a minus sign, U+2212, not a hyphen), ``0``: a change with one sign,
    never a signed zero."""
    if not value:
        return "0"
    return f"+{value:g}" if value > 0 else f"\N{MINUS SIGN}{-value:g}"


def request_shape(nodes: int, gpus_per_node: int, gpu_model: str, gpu_share: float = 0.0) -> str:
    """``2 nodes x 8 H100-80GB GPUs``, ``1 x 0.25 of a shared GPU``, ``1 node, CPU only``."""
    what = f"{gpu_model} GPU" if gpu_model else "GPU"
    if gpu_share:
        return f"{nodes} x {gpu_share:g} of a shared {what}"
    if not gpus_per_node:
        return f"{nodes} node{'s' if nodes > 1 else ''}, CPU only"
    return f"{nodes} node{'s' if nodes > 1 else ''} x {gpus_per_node} {what}{'s' if gpus_per_node > 1 else ''}"


# --- walltimes, as people type them and as every page shows them ----------------------

_WALLTIME = re.compile(r"^(?:(?P<d>\d+)-)?(?P<h>\d+):(?P<m>\d{1,2})(?::(?P<s>\d{1,2}))?$")
_UNIT = re.compile(r"^(?P<n>\d+)\s*(?P<u>[smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_walltime(text: str) -> int:
    """Seconds from ``3600``, ``90m``, ``2h``, ``1d``, ``1:30`` (h:mm), ``1:30:00`` or
    ``2-00:00:00`` (Slurm's days-hours:minutes:seconds). Raises ``ValueError``."""
    text = text.strip().lower()
    if text.isascii() and text.isdigit():
        return int(text)
    if unit := _UNIT.match(text):
        return int(unit["n"]) * _SECONDS[unit["u"]]
    if clock := _WALLTIME.match(text):
        return int(clock["d"] or 0) * 86400 + int(clock["h"]) * 3600 + int(clock["m"]) * 60 + int(clock["s"] or 0)
    raise ValueError("Give seconds, a duration like 90m, 2h or 1d, or h:mm:ss.")


def format_walltime(seconds: int) -> str:
    """A walltime as the form takes it (``parse_walltime`` reads it back): ``4h``, ``30m``,
    else ``h:mm:ss`` (``1:30:00``). What every page shows a walltime as."""
    hours, rest = divmod(int(seconds), 3600)
    if hours and not rest:
        return f"{hours}h"
    if not hours and rest and not rest % 60:
        return f"{rest // 60}m"
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
