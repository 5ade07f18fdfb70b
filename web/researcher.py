"""Researcher pages: dashboard, submit (with templates and the what-if), job list, job
detail and its verbs, API tokens.

Every queryset comes from ``people.access``: a job the user may not see is a 404, and
every write goes through ``scheduler.jobs`` or ``people.services``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, F
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from common.api.validators import plain_name
from common.nul import has_nul, nul_message
from monitoring import charts, readings
from monitoring.models import JobEfficiency
from monitoring.services import health_notes_for_job
from people.access import visible_jobs
from people.models import Account, ApiToken, JobTemplate
from people.services import create_api_token, revoke_api_token
from scheduler.api.arrays import ThrottleSerializer
from scheduler.api.throttles import SubmitThrottle, WhatIfThrottle
from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, TERMINAL_STATES, JobState
from scheduler.clusters.logs import read_job_log
from scheduler.jobs import verbs
from scheduler.jobs.array_verbs import ARRAY_VERBS, set_throttle
from scheduler.jobs.blockers import blockers_for_api
from scheduler.jobs.submit import submit_job
from scheduler.jobs.transitions import JobStateConflict
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job, JobFiles
from scheduler.reads import reports
from scheduler.reads.arrays import (
    ArraySummary,
    array_summary,
    collapse_pending,
    display_id,
    display_label,
    without_folded_tasks,
)
from scheduler.reads.sharing import share_costs
from scheduler.tick import estimates
from web import figures
from web.jobform import PRESETS, PRESETS_BY_SLUG, JobForm, job_as_fields
from web.words import about, blocker_title, evidence_items, request_shape, starts_in

PAGE_SIZE = 50
#: What the job list may be sorted by (each ends with the id, so pages never overlap).
SORTS: dict[str, tuple[str, list[Any]]] = {
    "-id": ("Newest first", ["-id"]),
    "id": ("Oldest first", ["id"]),
    "state": ("State", ["state", "-id"]),
    "name": ("Name", ["name", "-id"]),
    "-started_at": ("Started, latest first", ["-started_at", "-id"]),
    "-ended_at": ("Ended, latest first", ["-ended_at", "-id"]),
    "walltime_seconds": ("Walltime, shortest first", ["walltime_seconds", "-id"]),
    # Finished jobs by how well they used their GPUs; unmeasured and unfinished ones last.
    "gpu_util": ("GPU utilization, lowest first", [F("efficiency__gpu_util_mean").asc(nulls_last=True), "-id"]),
    "-gpu_util": ("GPU utilization, highest first", [F("efficiency__gpu_util_mean").desc(nulls_last=True), "-id"]),
}
#: Columns the list shows; the rest of a row (scripts, blockers) is never read.
LIST_COLUMNS = (
    "id",
    "array_job_id",
    "array_task_id",
    "name",
    "state",
    "pending_reason",
    "nodes",
    "gpus_per_node",
    "gpu_share",
    "gpu_model",
    "walltime_seconds",
    "submitted_at",
    "started_at",
    "ended_at",
    "estimated_start_at",
    "owner__username",
    "account__name",
    "efficiency__gpu_util_mean",
    "efficiency__samples",
)
VERBS = {"cancel", "hold", "release", "requeue"}
PAST = {"cancel": "cancelled", "hold": "held", "release": "released", "requeue": "requeued"}


def _safe_next(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return fallback


# --- Dashboard ------------------------------------------------------------------------------


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """My jobs by state, my accounts' fair-share factor and quota use, free GPUs by model,
    my next estimated starts."""
    user: Any = request.user
    now = timezone.now()
    mine = Job.objects.filter(owner_id=user.pk)
    by_state = dict(mine.order_by().values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    states = [(s.value, s.label, by_state.get(s.value, 0)) for s in JobState if by_state.get(s.value)]
    accounts = list(Account.objects.filter(memberships__user=user).order_by("name"))
    names = {a.name for a in accounts}
    share_rows = [r for r in reports.fairshare_report(now) if r.account in names and r.user == user.get_username()]
    upcoming = list(
        mine.filter(state=JobState.PENDING, estimated_start_at__isnull=False)
        .order_by("estimated_start_at", "id")
        .only("id", "name", "estimated_start_at", "nodes", "gpus_per_node", "gpu_model", "gpu_share")[:5]
    )
    # Coordinators also see their accounts' jobs here (``visible_jobs``), newest first.
    recent = list(
        visible_jobs(user, Job.objects.select_related("account", "owner")).only(*_recent_columns()).order_by("-id")[:10]
    )
    return render(
        request,
        "portal/dashboard.html",
        {
            "states": states,
            "total_jobs": sum(by_state.values()),
            "share_rows": share_rows,
            "quota_rows": figures.quota_use(accounts),
            "capacity": figures.free_gpus_by_model(),
            "upcoming": [(job, starts_in(job.estimated_start_at, now)) for job in upcoming],
            "recent": recent,
            "accounts": accounts,
        },
    )


def _recent_columns() -> list[str]:
    return [
        "id",
        "name",
        "state",
        "pending_reason",
        "nodes",
        "gpus_per_node",
        "gpu_share",
        "submitted_at",
        "account__name",
        "owner__username",
    ]


# --- Submit ------------------------------------------------------------------------------------


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
        "portal/jobs/submit.html",
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
            "portal/jobs/submit.html",
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


# --- Job list -----------------------------------------------------------------------------------


class JobFilterForm(forms.Form):
    state = forms.MultipleChoiceField(choices=JobState.choices, required=False, widget=forms.CheckboxSelectMultiple)
    account = forms.CharField(required=False, max_length=64)
    owner = forms.CharField(required=False, max_length=150)
    name = forms.CharField(required=False, max_length=128, label="Name contains")
    gpu_model = forms.CharField(required=False, max_length=64, label="GPU model")
    sort = forms.ChoiceField(choices=[(k, label) for k, (label, _) in SORTS.items()], required=False)
    page = forms.IntegerField(required=False, min_value=1, max_value=100_000)
    #: The tasks of one job array, each on its row (else its waiting tasks are one row).
    array = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1, widget=forms.HiddenInput)


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    """Filtered, sorted, paginated jobs the user may see.

    No ``COUNT(*)``: a page reads ``PAGE_SIZE + 1`` rows to know whether a next one
    exists, so the cost of a page does not grow with the number of matching jobs.
    """
    form = JobFilterForm(request.GET)
    jobs = visible_jobs(request.user, Job.objects.all())
    page, sort, array = 1, "-id", None
    if form.is_valid():
        data = form.cleaned_data
        array = data["array"]
        jobs = jobs.filter(array_job_id=array) if array else without_folded_tasks(jobs)
        if data["state"]:
            jobs = jobs.filter(state__in=data["state"])
        for field, lookup in (
            ("account", "account__name"),
            ("owner", "owner__username"),
            ("gpu_model", "gpu_model"),
            ("name", "name__icontains"),
        ):
            if data[field]:
                jobs = jobs.filter(**{lookup: data[field]})
        page = data["page"] or 1
        sort = data["sort"] or "-id"
    else:
        jobs = jobs.none()
    offset = (page - 1) * PAGE_SIZE
    rows = list(jobs.order_by(*SORTS[sort][1]).values(*LIST_COLUMNS)[offset : offset + PAGE_SIZE + 1])
    has_next = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    folded = {} if array else collapse_pending((r["id"], r["array_job_id"], r["state"]) for r in rows)
    for row in rows:
        row["folded"] = folded.get(row["id"])
        own = display_label(row["id"], row["array_job_id"], row["array_task_id"])
        row["label"] = row["folded"]["label"] if row["folded"] else own
    params = request.GET.copy()
    params.pop("page", None)
    return render(
        request,
        "portal/jobs/list.html",
        {
            "form": form,
            "rows": rows,
            "array": array,
            "page": page,
            "has_next": has_next,
            "base_query": params.urlencode(),
            "cancellable": {s.value for s in QUEUED_STATES | ACTIVE_STATES},
        },
    )


@login_required
@require_POST
def bulk_cancel(request: HttpRequest) -> HttpResponse:
    """Cancel every selected job the user may act on; report what could not be."""
    ids = [int(i) for i in request.POST.getlist("job") if i.isascii() and i.isdigit() and len(i) < 19]
    jobs = list(visible_jobs(request.user, Job.objects.filter(pk__in=ids)).order_by("id"))
    done, refused = [], []
    for job in jobs:
        try:
            cancel_job(job, by=request.user.get_username())
            done.append(job.id)
        except JobStateConflict as exc:
            refused.append(str(exc))
    unknown = len(set(ids) - {j.id for j in jobs})
    if done:
        messages.success(request, f"Cancelled {len(done)} job{'s' if len(done) > 1 else ''}: {_ids(done)}.")
    for problem in refused[:10]:
        messages.warning(request, problem)
    if unknown:
        messages.warning(request, f"{unknown} selected job(s) not found.")
    if not ids:
        messages.info(request, "Select jobs to cancel.")
    return HttpResponseRedirect(_safe_next(request, reverse("web:job-list")))


def _ids(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:20]))
    return shown + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")


# --- Job detail ---------------------------------------------------------------------------------


def _visible_job(request: HttpRequest, job_id: int) -> Job:
    base = Job.objects.select_related("owner", "account", "qos", "cluster")
    return get_object_or_404(visible_jobs(request.user, base), pk=job_id)


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _visible_job(request, job_id)
    now = timezone.now()
    blockers = shown_blockers(blockers_for_api(job.state, job.pending_blockers, job.pending_reason))
    priority = reports.priority_of(job, now) if job.state == JobState.PENDING else None
    live = job.state in ACTIVE_STATES
    metrics = readings.job_series(job, now)
    return render(
        request,
        "portal/jobs/detail.html",
        {
            "job": job,
            "events": job.events.order_by("id"),
            "blockers": blockers,
            "priority": priority,
            "starts_in": starts_in(job.estimated_start_at, now) if job.state == JobState.PENDING else "",
            "shape": request_shape(job.nodes, job.gpus_per_node, job.gpu_model, job.gpu_share),
            "log": read_job_log(job, 16_384) if job.external_id else "",
            "live": live,
            "gpu_figure": charts.job_gpu_figure(metrics, (job.started_at, job.ended_at or now))
            if job.started_at and any(m.points for m in metrics)
            else None,
            "files": _files_of(job),
            "retention_days": settings.JOB_FILES_RETENTION_DAYS,
            "health_notes": health_notes_for_job(job, now),
            "efficiency": JobEfficiency.objects.filter(job=job, attempt=job.attempt).first(),
            "share_costs": share_costs(job),
            "label": display_id(job),
            "array": _array_of(request, job),
            "array_verbs": list(ARRAY_VERBS),
            "may": {
                "cancel": job.state in QUEUED_STATES | ACTIVE_STATES,
                "hold": job.state == JobState.PENDING,
                "release": job.state == JobState.HELD,
                "requeue": job.state in ACTIVE_STATES | TERMINAL_STATES,
            },
        },
    )


def _files_of(job: Job) -> dict[str, Any] | None:
    """The names of the files ``job`` brought and when they expired (``None``: none
    brought); never their content."""
    if job.file_set_id is None:
        return None
    row = JobFiles.objects.filter(pk=job.file_set_id).values("names", "expired_at", "size_bytes").first()
    return dict(row) if row else None


def _array_of(request: HttpRequest, job: Job) -> ArraySummary | None:
    """The array ``job`` is a task of, as its reader may see it (``None`` for a plain job)."""
    if job.array_job_id is None:
        return None
    tasks = visible_jobs(request.user, Job.objects.filter(array_job_id=job.array_job_id))
    return array_summary(tasks, job.array_job_id)


@login_required
@require_POST
def array_verb(request: HttpRequest, array_job: int, verb: str) -> HttpResponse:
    """A verb on every task of an array (``scancel 42``), or its throttle (``verb`` "throttle")."""
    tasks = visible_jobs(request.user, Job.objects.filter(array_job_id=array_job))
    if (verb not in ARRAY_VERBS and verb != "throttle") or not tasks.exists():
        raise Http404("No such array or action.")
    if verb == "throttle":
        body = ThrottleSerializer(data={"throttle": request.POST.get("throttle", "")})  # the API's bounds
        if not body.is_valid():
            messages.error(request, "Throttle: give a number of tasks (0: no limit).")
        else:
            throttle = body.validated_data["throttle"]
            set_throttle(tasks, throttle)
            told = f"Array {array_job}: at most {throttle} tasks at once" if throttle else "No limit."
            messages.success(request, told)
        return redirect("web:job-detail", job_id=array_job)
    try:
        changed = ARRAY_VERBS[verb](tasks, array_job, by=request.user.get_username())
    except JobStateConflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Array {array_job}: {changed} task{'s' if changed != 1 else ''} {PAST[verb]}.")
    return redirect("web:job-detail", job_id=array_job)


@login_required
@require_GET
def job_log(request: HttpRequest, job_id: int) -> JsonResponse:
    """The log tail and state, for the detail page's refresh while the job runs."""
    job = _visible_job(request, job_id)
    return JsonResponse({"state": job.state, "log": read_job_log(job, 16_384) if job.external_id else ""})


@login_required
@require_POST
def job_verb(request: HttpRequest, job_id: int, verb: str) -> HttpResponse:
    if verb not in VERBS:
        raise Http404("No such action.")
    job = _visible_job(request, job_id)
    try:
        getattr(verbs, f"{verb}_job")(job, by=request.user.get_username())
    except JobStateConflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job {job.id} {PAST[verb]}.")
    return redirect("web:job-detail", job_id=job.id)


# --- API tokens -------------------------------------------------------------------------------------


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=64, help_text="Where you will use it, for example 'laptop'.", validators=[plain_name]
    )
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        min_value=1,
        max_value=3650,
        required=False,
        help_text="Empty: until you revoke it.",
    )
    read_only = forms.BooleanField(label="Read-only", required=False, help_text="It can read, never submit or change.")


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """List, create (the secret is shown once, in this response only) and revoke tokens."""
    user: Any = request.user
    secret = ""
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            _, secret = create_api_token(
                request.user, data["name"], expires_in_days=data["expires_in_days"], read_only=data["read_only"]
            )
            form = TokenForm()
    else:
        form = TokenForm()
    return render(
        request,
        "portal/tokens.html",
        {
            "form": form,
            "secret": secret,
            "tokens": ApiToken.objects.filter(user_id=user.pk),
            "api_url": request.build_absolute_uri("/").rstrip("/"),
        },
    )


@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=token_id, user_id=request.user.pk)
    revoke_api_token(token)
    messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("web:tokens")
