"""Validators shared by the API serializers."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from common.nul import has_nul, nul_message


class NoNulCharacters:
    """Refuse a NUL character in any string or key of a JSON value, naming the field.

    DRF's ``CharField`` already refuses NUL, but JSON and dict fields do not, and
    PostgreSQL refuses ``\\u0000`` in ``jsonb``: without this the save is a 500. As a
    field's validator DRF hands it the field (``requires_context``); called by hand with
    the value alone, the message says "This field".
    """

    requires_context = True

    def __call__(self, value: Any, field: Any = None) -> None:
        if has_nul(value):
            raise serializers.ValidationError(nul_message(getattr(field, "field_name", "") or "This field"))


no_nul_characters = NoNulCharacters()


#: Characters that reorder or hide the text around them (Unicode's bidirectional
#: embeddings, overrides and isolates, and the directional marks): in a name shown to
#: other people, "\u202eevil" reads as "live".
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def plain_name(value: str) -> None:
    """Refuse control characters (tabs and newlines too), line and paragraph separators
    and bidirectional controls in a name others will read: on pages, in ``qm jobs``, in
    Slurm's job name. Raises Django's ``ValidationError`` (DRF and forms both take it)."""
    _refuse_unplain(value, "names must be plain text")


def plain_address(value: str) -> None:
    """As :func:`plain_name`, for an e-mail address. Django's ``EmailValidator`` lets
    control characters through a quoted local part (``"a\\x01b"@example.org``) and
    text-direction controls through an internationalised domain; an address is shown
    on pages and goes into a mail header."""
    _refuse_unplain(value, "an e-mail address must be plain text")


def _refuse_unplain(value: str, rule: str) -> None:
    for position, char in enumerate(value):
        if char in BIDI_CONTROLS or unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            raise DjangoValidationError(
                f"Character {position + 1} (U+{ord(char):04X}) is a control or text-direction character; {rule}."
            )
