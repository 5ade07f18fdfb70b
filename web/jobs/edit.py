"""The edit page of a waiting job (``scontrol update`` in the browser): the fields
``PATCH /api/v1/jobs/{id}/`` takes, in the submit form's shapes, validated by the API's
own :func:`scheduler.api.job_edit.validate_edit` and applied by
:func:`scheduler.jobs.edit.edit_job`, so the page and the API accept and refuse the same
edits with the same words."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from rest_framework.exceptions import ValidationError as ApiValidationError

from common.labels import field_labels
from people.access import usable_qos, visible_jobs
from scheduler.api.job_edit import validate_edit
from scheduler.jobs.edit import EDITABLE_FIELDS, EDITABLE_STATES, edit_job
from scheduler.jobs.transitions import JobStateConflict
from scheduler.models import Job
from web.jobs.form import FIELD_SHAPES, flatten_errors


class JobEditForm(forms.Form):
    name = forms.CharField(max_length=128)
    walltime_seconds = forms.CharField(
        label="Walltime", help_text="2h, 90m, 1:30:00 or seconds; only staff may raise it."
    )
    qos = forms.ChoiceField(label="QOS", required=False)
    nice = forms.CharField(required=False, help_text="Lowers the job's priority by this much.")
    dependencies = forms.CharField(required=False, help_text="afterok:12 afterany:13")
    node_labels = forms.CharField(required=False, help_text="rack=r1, network=infiniband")
    gpu_model = forms.CharField(label="GPU model", required=False, help_text="Empty: any model.")

    #: How each field's text becomes the API's value, and a job's value the text.
    SHAPES: dict[str, tuple[Any, Any]] = {
        **FIELD_SHAPES,
        "nice": (int, str),
        "qos": (lambda text: text or None, lambda qos: qos.name if qos else ""),
    }

    def __init__(self, *args: Any, job: Job, **kwargs: Any) -> None:
        kwargs.setdefault("initial", {name: self.as_text(name, getattr(job, name)) for name in self.base_fields})
        super().__init__(*args, **kwargs)
        self.job = job
        allowed = {q.name for q in usable_qos(job.account)[0]} | ({job.qos.name} if job.qos else set())
        qos_field: Any = self.fields["qos"]
        qos_field.choices = [("", "default")] + [(name, name) for name in sorted(allowed)]

    @classmethod
    def as_text(cls, name: str, value: Any) -> str:
        return cls.SHAPES[name][1](value) if name in cls.SHAPES else str(value or "")

    def changes(self) -> dict[str, Any]:
        """The API body of what the person changed (only those fields: an unchanged
        field is no edit, whoever set it)."""
        body: dict[str, Any] = {}
        for name, text in self.cleaned_data.items():
            if text == self.as_text(name, getattr(self.job, name)):
                continue
            try:
                body[name] = self.SHAPES[name][0](text) if name in self.SHAPES else text
            except ValueError as exc:
                self.add_error(name, str(exc) if name != "nice" else "Give a whole number.")
        return body


@login_required
def job_edit(request: HttpRequest, job_id: int) -> HttpResponse:
    base = Job.objects.select_related("owner", "account", "qos")
    job = get_object_or_404(visible_jobs(request.user, base), pk=job_id)
    if job.state not in EDITABLE_STATES:
        messages.error(request, f"Job {job.id} is {job.state}; only PENDING or HELD jobs can be edited.")
        return redirect("web:job-detail", job_id=job.id)
    form = JobEditForm(request.POST or None, job=job)
    if request.method == "POST" and form.is_valid():
        body = form.changes()
        if not form.errors:
            try:
                changed = edit_job(job, validate_edit(job, body, request.user), by=request.user.get_username())
            except ApiValidationError as exc:
                detail: Any = exc.detail
                for name, problems in detail.items():
                    form.add_error(name if name in form.fields else None, flatten_errors(problems))
            except JobStateConflict as exc:
                messages.error(request, str(exc))
                return redirect("web:job-detail", job_id=job.id)
            else:
                what = field_labels([field for field in EDITABLE_FIELDS if field in changed]) or "nothing"
                messages.success(request, f"Job {job.id}: changed {what}.")
                return redirect("web:job-detail", job_id=job.id)
    return render(request, "web/jobs/edit.html", {"job": job, "form": form})
