"""JSON columns read as their text, parsed only where needed (the tick's bulk reads).

Django parses every JSON column of every row it reads; a tick reads three of them for
each of 10,000 waiting jobs, almost always ``[]``, ``{}`` or the blockers the tick itself
wrote last time. Read as text instead (``Cast(..., TextField())``), an empty value is
recognised without parsing, and stored blockers are compared by their text: equal text
means equal JSON; different text is parsed before deciding (the database may print
JSON in its own way: PostgreSQL's jsonb orders keys by length, and its numbers may be
written differently), so a comparison is never wrong, only sometimes slower.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from django.db import connection
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


def _key(name: str) -> tuple[int, bytes]:
    encoded = name.encode("utf-8")
    return (len(encoded), encoded)


def _jsonb_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonb_order(value[k]) for k in sorted(value, key=_key)}
    if isinstance(value, list):
        return [_jsonb_order(v) for v in value]
    return value


def printed(value: Any) -> str:
    """``value`` as this database prints a JSON column holding it (most of the time: see
    the module docstring)."""
    if connection.vendor == "postgresql":
        return json.dumps(_jsonb_order(value), ensure_ascii=False)
    return json.dumps(value)


def same(text: str | None, value: Any) -> bool:
    """Whether the stored JSON ``text`` holds ``value``."""
    if text is None:
        return False
    return text == printed(value) or json.loads(text) == value
