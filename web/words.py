"""Plain words for codes and durations on the pages."""

from __future__ import annotations

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
