"""Form fields shared by the pages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.utils import pretty_name

from common.nul import NUL, nul_message


class NulFreeCharField(forms.CharField):
    """Django's ``CharField`` (which refuses a NUL with a message that names nothing), with
    the message naming the field: "Reason may not contain a NUL character (\\x00)." """

    def get_bound_field(self, form: forms.BaseForm, field_name: str) -> forms.BoundField:
        # The field learns its name here; each form has its own copy of its fields.
        self.name_for_messages = str(self.label or pretty_name(field_name))
        return super().get_bound_field(form, field_name)

    def to_python(self, value: Any) -> str:
        if isinstance(value, str) and NUL in value:
            raise forms.ValidationError(
                nul_message(getattr(self, "name_for_messages", "This field")), code="null_characters_not_allowed"
            )
        return str(super().to_python(value))
