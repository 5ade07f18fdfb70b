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
