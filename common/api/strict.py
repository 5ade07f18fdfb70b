"""Unknown and misspelled fields are errors, on every write endpoint.

DRF drops fields a serializer does not declare, so ``{"gpus": 8}`` used to create a
1-GPU job and ``"gpu_modle"`` meant "any model", both with a 201. A request that says
something the portal would not do must be refused, naming the field: with the field it
probably meant, or, for a workload manager's option we do not support yet, saying so.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers


class RejectUnknownFields(serializers.Serializer):
    """Refuses a body (an object) with fields the serializer does not have: a 400 with
    one message per unknown field. ``field_hints`` names what a field means elsewhere
    (another tool's name for one of ours, or an option not supported yet); otherwise the
    closest field name is suggested."""

    field_hints: ClassVar[Mapping[str, str]] = {}

    def to_internal_value(self, data: Any) -> Any:
        """The declared fields' values; unknown fields are errors, reported together with
        the declared fields' own errors (nested ones included), all in one answer."""
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            unknown = {str(name): [self.unknown_field(str(name))] for name in data if name not in self.fields}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not unknown:
                raise
            known = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
            raise serializers.ValidationError({**known, **unknown}) from None
        if unknown:
            raise serializers.ValidationError(unknown)
        return value

    def unknown_field(self, name: str) -> str:
        """Why ``name`` is refused, and what to write instead."""
        if name in self.field_hints:
            return self.field_hints[name]
        writable = sorted(field for field, value in self.fields.items() if not value.read_only)
        close = difflib.get_close_matches(name, writable, n=1, cutoff=0.6)
        if close:
            return f"Unknown field; did you mean {close[0]!r}?"
        return f"Unknown field (this endpoint takes: {', '.join(writable)})."
