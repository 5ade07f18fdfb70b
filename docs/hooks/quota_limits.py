"""An MkDocs hook: the table of quota limits written from ``people.limits.QUOTA_LIMITS``
(their one list) at build time. A page asks for it with ``<!-- quota-limits -->``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- quota-limits -->"


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


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the marker with the table (MkDocs' ``on_page_markdown`` event)."""
    return markdown.replace(MARKER, table()) if MARKER in markdown else markdown
