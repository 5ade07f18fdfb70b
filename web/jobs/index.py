"""The job list (/jobs/): filters, sorts, pages without a COUNT(*), and cancelling many at once."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import F
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from people.access import visible_jobs
from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, JobState
from scheduler.jobs.transitions import JobStateConflict
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from scheduler.reads.arrays import (
    collapse_pending,
    display_label,
    without_folded_tasks,
)


def _safe_next(request: HttpRequest, fallback: str) -> str:
    """Where to go back to: the page's own ``next`` when it is on this site, else ``fallback``."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return fallback


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
        "web/jobs/list.html",
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
