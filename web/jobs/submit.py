"""The submit page: the form, its presets and saved templates, and the what-if that
says when a job would start before it is sent."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from common.api.validators import plain_name
from common.nul import has_nul, nul_message
from people.access import visible_jobs
from people.models import Account, JobTemplate
from scheduler.api.throttles import SubmitThrottle, WhatIfThrottle
from scheduler.jobs.submit import submit_job
from scheduler.models import Job
from scheduler.tick import estimates
from web.jobs.form import PRESETS, PRESETS_BY_SLUG, JobForm, job_as_fields
from web.words import about, blocker_title, evidence_items, request_shape


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    """The submit form. Buttons: ``estimate`` (what-if, nothing submitted), ``submit``,
    ``save-template`` (keeps the form's fields as a personal template)."""
    user: Any = request.user
    saved = JobTemplate.objects.filter(owner=user)
    estimate: dict[str, Any] | None = None
    if request.method == "POST":
        form = JobForm(request.POST, request.FILES, request=request)
        action = request.POST.get("action", "submit")
        if action == "save-template":
            return _save_template(request, form)
        if form.is_valid():
            data = dict(form.validated)
            account, qos = data.pop("account"), data.pop("qos")
            try:
                if action == "estimate":
                    estimate = _what_if_if_allowed(request, form, account, qos, data)
                elif _submission_allowed(request, form):
                    job = submit_job(owner=user, account=account, qos=qos, **data)
                    if job.array_job_id:
                        messages.success(request, f"Array job {job.id} submitted: {job.array_task_count} tasks.")
                    else:
                        messages.success(request, f"Job {job.id} submitted.")
                    return redirect("web:job-detail", job_id=job.id)
            except DjangoValidationError as exc:
                form.add_django_errors(exc)
    else:
        form = JobForm(initial=_initial(request), request=request)
    return render(
        request,
        "web/jobs/submit.html",
        {"form": form, "presets": PRESETS, "saved": saved, "estimate": estimate, "gpu_models": form.gpu_models},
    )


def _initial(request: HttpRequest) -> dict[str, Any]:
    """Fields from ``?template=<preset>``, ``?saved=<id>`` or ``?copy=<job id>``."""
    user: Any = request.user
    if slug := request.GET.get("template"):
        preset = PRESETS_BY_SLUG.get(slug)
        return dict(preset.fields) if preset else {}
    if (saved := request.GET.get("saved", "")).isdigit():
        template = JobTemplate.objects.filter(owner=user, pk=int(saved)).first()
        return dict(template.fields) if template else {}
    if (copy := request.GET.get("copy", "")).isdigit():
        job = visible_jobs(user, Job.objects.select_related("account", "qos")).filter(pk=int(copy)).first()
        if job is None:
            raise Http404("No such job.")
        return {**job_as_fields(job), "name": f"{job.name}-copy"[:128]}
    return {}


def _what_if_if_allowed(
    request: HttpRequest, form: JobForm, account: Account, qos: Any, data: dict[str, Any]
) -> dict[str, Any] | None:
    """The what-if, within the same per-user rate as the API's (``WhatIfThrottle``); over
    it, a form error says when to ask again."""
    throttle = WhatIfThrottle()
    if not throttle.allow_request(request, None):  # type: ignore[arg-type]
        wait = math.ceil(throttle.wait() or 1)
        form.add_error(None, f"Too many estimates in a short time; ask again in {wait} s.")
        return None
    return _what_if(request.user, account, qos, data)


def _submission_allowed(request: HttpRequest, form: JobForm) -> bool:
    """Whether a submission is within ``JOB_SUBMIT_RATE`` (``SubmitThrottle``, the API's);
    over it, a form error says when to submit again."""
    throttle = SubmitThrottle()
    if throttle.allow_request(request, None):  # type: ignore[arg-type]
        return True
    wait = math.ceil(throttle.wait() or 1)
    form.add_error(
        None,
        f"Too many submissions in a short time (at most {throttle.get_rate()}); submit again in {wait} s, or "
        "submit many jobs at once as an array.",
    )
    return False


def _what_if(user: Any, account: Account, qos: Any, data: dict[str, Any]) -> dict[str, Any]:
    now = timezone.now()
    answer = estimates.what_if(owner=user, account=account, qos=qos, now=now, **data)
    shape = request_shape(data["nodes"], data["gpus_per_node"], data.get("gpu_model", ""), data["gpu_share"])
    if answer.would_start_now:
        headline = f"Would start now on {shape}."
    elif answer.estimated_start is not None:
        headline = f"Would start in {about((answer.estimated_start - now).total_seconds())} on {shape}."
    else:
        headline = f"Would wait ({answer.pending_reason}); no start estimate for {shape}."
    blockers = shown_blockers(answer.blockers)
    return {"headline": headline, "answer": answer, "blockers": blockers}


def shown_blockers(blockers: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blockers as the pages show them: a title for the code, the sentence, the figures."""
    return [
        {
            "code": b["code"],
            "title": blocker_title(b["code"]),
            "message": b["message"],
            "evidence": evidence_items(b["evidence"]),
        }
        for b in blockers
    ]


def _save_template(request: HttpRequest, form: JobForm) -> HttpResponse:
    name = request.POST.get("template_name", "").strip()[:64]
    problem = "Give the template a name." if not name else ""
    try:
        plain_name(name)  # a NUL is a control character: refused here with the others
    except DjangoValidationError as exc:
        problem = exc.messages[0]
    # NUL cannot be stored (PostgreSQL text and JSON refuse it) and no field needs it.
    fields = {k: str(request.POST.get(k, ""))[:100_000] for k in form.fields if request.POST.get(k)}
    if not problem and (with_nul := next((k for k, v in fields.items() if has_nul(v)), None)):
        problem = nul_message(str(form.fields[with_nul].label or with_nul))
    if problem:
        messages.error(request, problem)
        return render(
            request,
            "web/jobs/submit.html",
            {
                "form": form,
                "presets": PRESETS,
                "saved": JobTemplate.objects.filter(owner=request.user),  # type: ignore[misc]
                "gpu_models": form.gpu_models,
                "template_error": problem,
            },
        )
    JobTemplate.objects.update_or_create(owner=request.user, name=name, defaults={"fields": fields})  # type: ignore[misc]
    messages.success(request, f"Template {name!r} saved.")
    return redirect(reverse("web:job-submit") + "?" + _query(saved=_template_id(request, name)))


def _template_id(request: HttpRequest, name: str) -> str:
    return str(JobTemplate.objects.get(owner=request.user, name=name).pk)  # type: ignore[misc]


def _query(**params: str) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


@login_required
@require_POST
def delete_template(request: HttpRequest, template_id: int) -> HttpResponse:
    template = get_object_or_404(JobTemplate, pk=template_id, owner=request.user)
    template.delete()
    messages.success(request, f"Template {template.name!r} deleted.")
    return redirect("web:job-submit")
