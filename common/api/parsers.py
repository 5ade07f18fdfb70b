"""Request parsers: DRF's, minus the ways a malformed body becomes a 500; and a form body
read as the object it stands for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser; a body nested deeper than Python's ``json`` can decode is a 400."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None


def as_object(data: Any) -> Any:
    """A parsed body as the JSON object it stands for: a form (the ``QueryDict`` the form
    and multipart parsers give) becomes a plain ``dict`` of each field's value, the last
    one as DRF's own fields read a form; anything else is returned as it is.

    Why: a ``QueryDict`` is a ``dict`` whose own items are lists of values, so code that
    merges or copies a body as a dict (``{**base, **body}``) sends ``["x"]`` on where the
    sender wrote ``x``, and the field then says "Not a valid string."."""
    if isinstance(data, QueryDict):
        return data.dict()
    return data
