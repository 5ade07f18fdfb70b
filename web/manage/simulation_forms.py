"""The forms that ask for simulator runs: a preview of an account change (on the
account's page) and a replay (the simulator page); apart from the views so that the
account page and the simulator views can both use them."""

from __future__ import annotations

from typing import Any

from django import forms

from people.limits import quota_limit
from scheduler.previews import WINDOWS
from scheduler.replay.simulator import POLICIES
from scheduler.simulations import MAX_TRACE_CHARS, trace_problem

#: The quota limits the account page offers to try (the API takes every one of
#: ``people.limits.PREVIEW_LIMITS``): the two that decide how many GPUs it gets.
PAGE_LIMITS = ("max_gpus", "guaranteed_gpus")


class PreviewForm(forms.Form):
    days = forms.TypedChoiceField(choices=[(d, f"last {d} days") for d in WINDOWS], coerce=int, initial=7)
    shares = forms.IntegerField(required=False, min_value=0, help_text="Empty: as they are.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in PAGE_LIMITS:
            self.fields[name] = forms.IntegerField(
                required=False, min_value=0, label=quota_limit(name).label, help_text="Empty: as it is."
            )

    def body(self) -> dict[str, Any]:
        """The API's body for what was typed (empty fields are not part of the change)."""
        data = self.cleaned_data
        limits = {name: data[name] for name in PAGE_LIMITS if data.get(name) is not None}
        return {"days": data["days"], "shares": data.get("shares"), "limits": limits or None}


class SimulatorForm(forms.Form):
    trace = forms.FileField(
        required=False,
        help_text="A Philly-format CSV: job_id,submit_s,duration_s,num_gpus,vc. Empty: this site's own history.",
    )
    days = forms.TypedChoiceField(
        choices=[(d, f"last {d} days") for d in WINDOWS], coerce=int, initial=7, label="History (without a trace)"
    )
    policies = forms.MultipleChoiceField(
        choices=[(name, name) for name in sorted(POLICIES)],
        initial=["fairshare-backfill", "fifo-backfill"],
        widget=forms.CheckboxSelectMultiple,
    )
    nodes = forms.IntegerField(required=False, min_value=1, max_value=10_000, help_text="Empty: this site's nodes.")
    gpus_per_node = forms.IntegerField(required=False, min_value=1, max_value=64, initial=8, label="GPUs per node")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("trace")
        if upload is not None:
            try:
                data["trace_text"] = upload.read(MAX_TRACE_CHARS + 1).decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("trace", "The trace must be UTF-8 text.")
                return data
            problem = trace_problem(data["trace_text"])
            if problem:
                self.add_error("trace", problem)
        return data
