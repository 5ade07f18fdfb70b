"""The form that asks for a preview of an account change (on the account's page), apart
from the views so that the account page and the preview views can both use it."""

from __future__ import annotations

from typing import Any

from django import forms

from scheduler.previews import WINDOWS


class PreviewForm(forms.Form):
    days = forms.TypedChoiceField(choices=[(d, f"last {d} days") for d in WINDOWS], coerce=int, initial=7)
    shares = forms.IntegerField(required=False, min_value=0, help_text="Empty: as they are.")
    max_gpus = forms.IntegerField(required=False, min_value=0, label="Max GPUs", help_text="Empty: as it is.")
    guaranteed_gpus = forms.IntegerField(
        required=False, min_value=0, label="Guaranteed GPUs", help_text="Empty: as it is."
    )

    def body(self) -> dict[str, Any]:
        """The API's body for what was typed (empty fields are not part of the change)."""
        data = self.cleaned_data
        limits = {name: data[name] for name in ("max_gpus", "guaranteed_gpus") if data.get(name) is not None}
        return {"days": data["days"], "shares": data.get("shares"), "limits": limits or None}
