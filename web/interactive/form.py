"""The launch form of one app: its own fields, then who pays and what the session holds.

It only shapes what people type (a walltime as ``2h``, CPUs as ``0.5``); every rule is
the launch's (``scheduler.sessions.launch``: the app's fields, admission, the quotas),
whose problems are shown against the field they name.
"""

from __future__ import annotations

from typing import Any

from django import forms

from people.access import default_account
from people.models import Account
from scheduler.api.serializers import MAX_WALLTIME
from scheduler.jobs.request import parse_cpus
from scheduler.models import InteractiveApp
from scheduler.sessions.launch import Resources, default_resources
from web.words import format_walltime, parse_walltime

#: A job request's field -> the form's field that sets it (the others: the form's top).
FORM_NAMES = {
    "account": "account",
    "qos": "account",
    "gpus_per_node": "gpus",
    "cpus_per_node": "cpus",
    "memory_mib_per_node": "memory_mib",
    "walltime_seconds": "walltime",
}
#: The form's own fields, after the app's.
RESOURCE_FIELDS = ("account", "gpus", "cpus", "memory_mib", "walltime")


def _app_field(spec: dict[str, Any]) -> forms.Field:
    """One of the app's fields as a form field (a choice as a select, else a text box)."""
    common = {
        "label": spec.get("label") or spec["name"],
        "help_text": spec.get("help", ""),
        "required": False,  # the launch says what is missing, with the default applied
        "initial": spec.get("default", ""),
    }
    if spec.get("kind") == "choice":
        return forms.ChoiceField(choices=[(c, c) for c in spec.get("choices") or []], **common)
    return forms.CharField(max_length=4096, strip=True, **common)


class LaunchForm(forms.Form):
    """Built per app: its fields by name, then :data:`RESOURCE_FIELDS`."""

    account = forms.ChoiceField(required=False, help_text="The account the GPU-hours are charged to.")
    gpus = forms.IntegerField(label="GPUs", min_value=0, max_value=1024, help_text="0 for none.")
    cpus = forms.CharField(label="CPUs", help_text="Part of a CPU (0.5) where the cluster allows it.")
    memory_mib = forms.IntegerField(
        label="Memory (MiB)", min_value=0, max_value=2**31 - 1, help_text="0: the cluster's default."
    )
    walltime = forms.CharField(label="Walltime", help_text="2h, 90m or 1:30:00: the session ends then.")

    def __init__(self, *args: Any, app: InteractiveApp, user: Any, **kwargs: Any) -> None:
        defaults = default_resources(app)
        kwargs.setdefault(
            "initial",
            {
                "gpus": defaults.gpus,
                "cpus": format(defaults.cpus.normalize(), "f"),
                "memory_mib": defaults.memory_mib,
                "walltime": format_walltime(defaults.walltime_seconds),
            },
        )
        super().__init__(*args, **kwargs)
        self.app = app
        self.app_names = [str(spec["name"]) for spec in app.form_fields]
        own = {str(spec["name"]): _app_field(spec) for spec in app.form_fields}
        self.fields = {**own, **{name: self.fields[name] for name in RESOURCE_FIELDS}}
        accounts = Account.objects.all() if user.is_staff else Account.objects.filter(memberships__user=user)
        default = default_account(user)
        account: Any = self.fields["account"]
        account.choices = [("", f"default ({default.name})" if default else "default")] + [
            (name, name) for name in accounts.order_by("name").values_list("name", flat=True)
        ]

    def clean_cpus(self) -> Any:
        try:
            return parse_cpus(self.cleaned_data["cpus"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_walltime(self) -> int:
        try:
            seconds = parse_walltime(self.cleaned_data["walltime"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        if not 1 <= seconds <= MAX_WALLTIME:
            raise forms.ValidationError(f"Give at least a second and at most {format_walltime(MAX_WALLTIME)}.")
        return seconds

    def app_fields(self) -> list[Any]:
        return [self[name] for name in self.app_names]

    def resource_fields(self) -> list[Any]:
        return [self[name] for name in RESOURCE_FIELDS]

    def values(self) -> dict[str, str]:
        return {name: self.cleaned_data.get(name) or "" for name in self.app_names}

    def account_chosen(self) -> Account | None:
        name = self.cleaned_data.get("account")
        return Account.objects.filter(name=name).first() if name else None

    def resources(self) -> Resources:
        data = self.cleaned_data
        return Resources(data["gpus"], data["cpus"], data["memory_mib"], data["walltime"])

    def add_launch_problems(self, problems: dict[str, Any]) -> None:
        """A launch's refusal, each problem against the field it names."""
        for field, said in problems.items():
            if field == "values" and isinstance(said, dict):
                for name, lines in said.items():
                    self.add_error(name if name in self.fields else None, lines)
                continue
            target = FORM_NAMES.get(field)
            self.add_error(target if target in self.fields and target not in self.errors else None, said)
