"""The submit page: the form, its presets and saved templates, and the what-if that
says when a job would start before it is sent."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
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
from people.models import Account, JobTemplate, SiteTemplate
from people.services import save_site_template
from scheduler.advice import advice_sentence
from scheduler.api.throttles import SubmitThrottle, WhatIfThrottle
from scheduler.clusters.software import missing_commands
from scheduler.jobs.submit import submit_job
from scheduler.models import Job
from scheduler.tick import estimates
from web.jobs.form import JobForm, job_as_fields
from web.jobs.presets import PRESETS, PRESETS_BY_SLUG
from web.words import about, blocker_title, evidence_items, request_shape


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    """The submit form. Buttons: ``estimate`` (what-if, nothing submitted), ``submit``,
    ``save-template`` (keeps the form's fields as a personal template)."""
    user: Any = request.user
    estimate: dict[str, Any] | None = None
    if request.method == "POST":
        form = JobForm(request.POST, request.FILES, request=request)
        action = request.POST.get("action", "submit")
        if action in ("save-template", "save-site-template"):
            return _save_template(request, form, for_everyone=action == "save-site-template")
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
    return _page(request, form, estimate=estimate)


def _page(request: HttpRequest, form: JobForm, **extra: Any) -> HttpResponse:
    """The submit page: the form, every template (built-in, the site's, the user's own) and
    what the chosen built-in one needs and brings."""
    user: Any = request.user
    preset = PRESETS_BY_SLUG.get(str(form["template"].value() or ""))
    context = {
        "form": form,
        "presets": PRESETS,
        "site_templates": SiteTemplate.objects.all(),
        "saved": JobTemplate.objects.filter(owner=user),
        "gpu_models": form.gpu_models,
        "preset": preset,
        "missing": missing_commands(preset.requires) if preset else {},
        "max_body_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        **extra,
    }
    return render(request, "web/jobs/submit.html", context)


def _initial(request: HttpRequest) -> dict[str, Any]:
    """Fields from ``?template=<preset>``, ``?saved=<id>`` or ``?copy=<job id>``."""
    user: Any = request.user
    if slug := request.GET.get("template"):
        preset = PRESETS_BY_SLUG.get(slug)
        return {**preset.fields, "template": slug} if preset else {}
    if (site := request.GET.get("site", "")).isdigit():
        site_template = SiteTemplate.objects.filter(pk=int(site)).first()
        return dict(site_template.fields) if site_template else {}
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
    # What the user's past jobs of this shape say of it (on any cluster: none is chosen yet).
    advice = advice_sentence(
        user.pk,
        nodes=data["nodes"],
        gpus_per_node=data["gpus_per_node"],
        gpu_share=data["gpu_share"],
        walltime_seconds=data["walltime_seconds"],
        gpu_model=data.get("gpu_model", ""),
        cluster_id=None,
        now=now,
    )
    return {"headline": headline, "answer": answer, "blockers": blockers, "advice": advice}


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


#: The longest a template's field may be (the script field's text, mostly).
TEMPLATE_FIELD_MAX = 100_000


def _save_template(request: HttpRequest, form: JobForm, *, for_everyone: bool) -> HttpResponse:
    """Keep the form's fields as the user's own template, or (staff) as a site template
    everyone sees; a problem is said on the page, nothing half-saved."""
    user: Any = request.user
    name = request.POST.get("template_name", "").strip()
    fields = {k: str(request.POST[k]) for k in form.fields if request.POST.get(k)}
    if problem := _template_problem(form, name, fields) or (
        "Only admins save templates for everyone." if for_everyone and not user.is_staff else ""
    ):
        messages.error(request, problem)
        return _page(request, form, template_error=problem)
    if for_everyone:
        description = request.POST.get("template_description", "").strip()[:300]
        site = save_site_template(user, name, description, fields)
        messages.success(request, f"Template {name!r} saved for everyone.")
        return redirect(reverse("web:job-submit") + "?" + urlencode({"site": site.pk}))
    mine, _ = JobTemplate.objects.update_or_create(owner=user, name=name, defaults={"fields": fields})
    messages.success(request, f"Template {name!r} saved.")
    return redirect(reverse("web:job-submit") + "?" + urlencode({"saved": mine.pk}))


def _template_problem(form: JobForm, name: str, fields: dict[str, str]) -> str:
    """Why these fields cannot be saved under ``name`` ('' when they can)."""
    if not name:
        return "Give the template a name."
    if len(name) > 64:
        return "A template's name has at most 64 characters."
    try:
        plain_name(name)  # a NUL is a control character: refused here with the others
    except DjangoValidationError as exc:
        return str(exc.messages[0])
    for key, value in fields.items():
        label = str(form.fields[key].label or key)
        # NUL cannot be stored (PostgreSQL text and JSON refuse it) and no field needs it.
        if has_nul(value):
            return nul_message(label)
        if len(value) > TEMPLATE_FIELD_MAX:
            return f"{label} is too long for a template ({len(value):,} characters, at most {TEMPLATE_FIELD_MAX:,})."
    return ""


@login_required
@require_POST
def delete_template(request: HttpRequest, template_id: int) -> HttpResponse:
    template = get_object_or_404(JobTemplate, pk=template_id, owner=request.user)
    template.delete()
    messages.success(request, f"Template {template.name!r} deleted.")
    return redirect("web:job-submit")
