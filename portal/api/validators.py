"""Validators shared by the API serializers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def no_nul_characters(value: Any) -> None:
    """Refuse a NUL character in any string or key of a JSON value.

    DRF's ``CharField`` already refuses NUL, but JSON and dict fields do not, and
    PostgreSQL refuses ``\\u0000`` in ``jsonb``: without this the save is a 500.
    """
    pending = [value]
    while pending:  # a loop, not recursion: the body's nesting is the client's choice
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise serializers.ValidationError("Null characters are not allowed.")
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
