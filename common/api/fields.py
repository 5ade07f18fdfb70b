"""Serializer fields shared by the API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class SlugRelatedField(serializers.SlugRelatedField):
    """DRF's, but a slug holding a NUL character is invalid input, not a database error.

    The field looks the slug up before any validator runs, and PostgreSQL refuses NUL in
    a text parameter, so without this check the lookup itself is a 500.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("invalid")
        return super().to_internal_value(data)


class TextField(serializers.CharField):
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
