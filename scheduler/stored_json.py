"""JSON columns read as their text, parsed only where needed (the tick's bulk reads).

Django parses every JSON column of every row it reads, through its converters; a tick
reads three of them for each of 10,000 waiting jobs, almost always ``[]`` or ``{}``.
Read as text instead (``Cast(..., TextField())``), an empty value is recognised without
parsing, and the rest is parsed by the C decoder only where it is needed.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from django.db.models import Expression, TextField
from django.db.models.functions import Cast

#: How an empty value is printed: nothing to parse.
_EMPTY = frozenset({"[]", "{}", "null"})


def as_text(column: str) -> Expression:
    """The column's JSON as the database prints it, for ``annotate``/``values``."""
    return Cast(column, TextField())


def parsed(text: str | None, default: Any) -> Any:
    """A JSON column read :func:`as_text`, as Python (``default`` for NULL or empty)."""
    if text is None or text in _EMPTY:
        return copy.copy(default)  # a fresh [] or {}: callers may keep it
    return json.loads(text)
