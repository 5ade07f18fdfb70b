"""NUL characters (``\\x00``): PostgreSQL stores none (not in text, not in ``jsonb``, not
in a lookup's parameter) and no field needs one, so text from outside that holds one is
refused with a message naming the field, rather than failing at the database as a 500.

The one check. Forms use :class:`common.forms.NulFreeCharField`; serializers
:class:`common.api.fields.NulFreeCharField` (and its :class:`~common.api.fields.TextField`,
:class:`~common.api.fields.SlugRelatedField`) or, for JSON, the validator
:data:`common.api.validators.no_nul_characters`; hand-written validators (ingest) call
:func:`has_nul`. ``tests/common/test_nul.py`` holds each to it.
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"


def has_nul(value: Any) -> bool:
    """Whether ``value`` (a string, or JSON: any string, key or item inside it) holds a NUL.

    A loop, not recursion: how deep a JSON body nests is the client's choice.
    """
    if isinstance(value, str):  # the usual case, at the speed of ``in``
        return NUL in value
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return False


def nul_message(name: str) -> str:
    """The message for a NUL in the field called ``name`` (its label or its name)."""
    return f"{name} may not contain a NUL character (\\x00)."
