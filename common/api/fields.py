"""Serializer fields shared by the API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.nul import has_nul, nul_message


def _name(field: serializers.Field) -> str:
    """The field's name for a message; a list's item (``many=True``) goes by its list's."""
    return field.field_name or getattr(field.parent, "field_name", "") or "This field"


class SlugRelatedField(serializers.SlugRelatedField):
    """DRF's, but a slug holding a NUL character is invalid input, not a database error.

    The field looks the slug up before any validator runs, and PostgreSQL refuses NUL in
    a text parameter, so without this check the lookup itself is a 500.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and has_nul(data):
            raise serializers.ValidationError(nul_message(_name(self)), code="invalid")
        return super().to_internal_value(data)


class NulFreeCharField(serializers.CharField):
    """DRF's ``CharField`` (which refuses a NUL with a message that names nothing), with
    the message naming the field: "name may not contain a NUL character (\\x00)."."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str) and has_nul(data):
            raise serializers.ValidationError(nul_message(_name(self)), code="null_characters")
        return str(super().to_internal_value(data))


class TextField(NulFreeCharField):
    """A string, as sent: never trimmed, and a number or a boolean is an error, not turned
    into text (a file's content that arrives as ``5`` was not meant to be ``"5"``)."""

    default_error_messages = {"not_text": "Must be a JSON string."}

    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)  # type: ignore[arg-type]

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
        return str(super().to_internal_value(data))
