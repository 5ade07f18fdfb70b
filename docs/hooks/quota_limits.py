"""An MkDocs hook: the tables of quota limits and of QOS limits written from
``people.limits.QUOTA_LIMITS`` and ``people.limits.QOS_LIMITS`` (their one lists) at build
time. A page asks for them with ``<!-- quota-limits -->`` and ``<!-- qos-limits -->``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- quota-limits -->"
QOS_MARKER = "<!-- qos-limits -->"


def table() -> str:
    """One row per limit: its field, what it limits, and where it does not apply."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from people.limits import QUOTA_LIMITS

    rows = ["| field | unit | limit |", "|---|---|---|"]
    for limit in QUOTA_LIMITS:
        notes = [limit.meaning]
        if limit.accounts_only:
            notes.append("Accounts only.")
        if limit.not_in_core:
            notes.append(f"Enforced at submit: {limit.not_in_core}.")
        if limit.not_previewed:
            notes.append(f"Not in previews: {limit.not_previewed}.")
        text = " ".join(notes).replace("|", "\\|")
        rows.append(f"| `{limit.name}` | {limit.unit} | {text} |")
    return "\n".join(rows)


def qos_table() -> str:
    """One row per QOS limit: its field, the Slurm QOS option it stands for, the reason
    word a job gets for it, and what it caps."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from people.limits import QOS_LIMITS

    rows = ["| field | Slurm QOS option | reason | unit | limit |", "|---|---|---|---|---|"]
    for limit in QOS_LIMITS:
        notes = limit.meaning if limit.core else f"{limit.meaning} Enforced at submit (a 400 on `qos`)."
        text = notes.replace("|", "\\|")
        rows.append(f"| `{limit.name}` | `{limit.slurm}` | `{limit.reason}` | {limit.unit} | {text} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the markers with the tables (MkDocs' ``on_page_markdown`` event)."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, table())
    if QOS_MARKER in markdown:
        markdown = markdown.replace(QOS_MARKER, qos_table())
    return markdown
