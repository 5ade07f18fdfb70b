"""Staff pages for interactive apps (``/manage/apps/``): every app, and a page to add one
or change, disable or delete it, without code. The form is validated by the API's
serializer (a command naming an unknown placeholder is refused against the command) and
saved by the same service (``scheduler.sessions.apps``: audited)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from scheduler.api.sessions import InteractiveAppSerializer
from scheduler.models import Cluster, InteractiveApp
from scheduler.sessions.apps import AppInUse, delete_app, save_app
from web.jobs.form import LinesField
from web.manage.access import staff_required, validated
from web.words import format_walltime, parse_walltime

FORM_FIELDS_HELP = (
    'A JSON list of the launch form\'s own fields: [{"name": "logdir", "label": "Log directory", "kind": "path", '
    '"default": "", "help": "..."}]. Kinds: text, integer, choice (with "choices": [...]), path (a directory of '
    "the user's). Each is {name} in the command, shell-quoted."
)


class AppForm(forms.Form):
    slug = forms.SlugField(max_length=64, help_text="Its name in URLs: /interactive/<slug>/.")
    name = forms.CharField(max_length=128)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    form_fields = LinesField(
        label="Form fields", required=False, help_text=FORM_FIELDS_HELP, widget=forms.Textarea(attrs={"rows": 4})
    )
    command = LinesField(
        help_text="The bash that starts the server in the foreground: {port}, {base_url} (/sessions/<job id>/) "
        "and each form field's {name}; the secret is in $QM_SESSION_SECRET, never on a command line.",
        widget=forms.Textarea(attrs={"rows": 4}),
    )
    ready_path = forms.CharField(
        required=False, max_length=256, help_text="A path below the base URL that answers once it is ready."
    )
    secret_via = forms.ChoiceField(
        label="Secret", choices=list(InteractiveApp._meta.get_field("secret_via").choices or []), initial="header"
    )
    clusters = forms.ModelMultipleChoiceField(
        queryset=Cluster.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every cluster.",
    )
    default_gpus = forms.IntegerField(label="GPUs", min_value=0, initial=1)
    default_cpus = forms.IntegerField(label="CPUs", min_value=1, initial=2)
    default_memory_mib = forms.IntegerField(label="Memory (MiB)", min_value=0, initial=0)
    default_walltime = forms.CharField(label="Walltime", initial="4h", help_text="2h, 90m or 1:30:00.")
    enabled = forms.BooleanField(required=False, initial=True, help_text="Offered to users.")

    def clean_form_fields(self) -> Any:
        text = self.cleaned_data["form_fields"].strip()
        try:
            return json.loads(text) if text else []
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not JSON: {exc.msg} (line {exc.lineno}).") from None

    def clean_default_walltime(self) -> int:
        try:
            return parse_walltime(self.cleaned_data["default_walltime"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def api_body(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["clusters"] = [c.name for c in data["clusters"]]
        data["default_walltime_seconds"] = data.pop("default_walltime")
        return data


def _initial(app: InteractiveApp) -> dict[str, Any]:
    return {
        **{name: getattr(app, name) for name in ("slug", "name", "description", "command", "ready_path")},
        **{name: getattr(app, name) for name in ("secret_via", "default_gpus", "default_cpus", "enabled")},
        "default_memory_mib": app.default_memory_mib,
        "form_fields": json.dumps(app.form_fields, indent=1) if app.form_fields else "",
        "clusters": list(app.clusters.all()),
        "default_walltime": format_walltime(app.default_walltime_seconds),
    }


@staff_required
@require_GET
def apps(request: HttpRequest) -> HttpResponse:
    listed = InteractiveApp.objects.prefetch_related("clusters").order_by("name")
    return render(request, "web/manage/apps.html", {"apps": listed})


@staff_required
def app_edit(request: HttpRequest, app_id: int | None = None) -> HttpResponse:
    """Add an app (no ``app_id``), or change or delete one (``action=delete``)."""
    app = get_object_or_404(InteractiveApp, pk=app_id) if app_id is not None else None
    if request.method == "POST" and app is not None and request.POST.get("action") == "delete":
        try:
            delete_app(request.user, app)
        except AppInUse as exc:
            messages.error(request, str(exc))
            return redirect("web:manage-app", app_id=app.pk)
        messages.success(request, f"App {app.name!r} deleted.")
        return redirect("web:manage-apps")
    if request.method == "POST":
        form = AppForm(request.POST)
        if form.is_valid():
            serializer = InteractiveAppSerializer(app, data=form.api_body(), context={"request": request})
            if validated(form, serializer):
                fields = dict(serializer.validated_data)
                clusters = fields.pop("clusters", [])
                saved = save_app(request.user, app, fields, clusters)
                messages.success(request, f"App {saved.name!r} saved.")
                return redirect("web:manage-apps")
    else:
        form = AppForm(initial=_initial(app)) if app else AppForm()
    return render(request, "web/manage/app_edit.html", {"form": form, "app": app})
