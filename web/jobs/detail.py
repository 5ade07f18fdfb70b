"""One job's page: its state, why it waits, its GPUs' charts, its files, its array and its log."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from monitoring import charts, readings
from monitoring.models import JobEfficiency
from monitoring.services import health_notes_for_job
from notifications.wanted import told_of
from people.access import visible_jobs
from people.limits import qos_limits_text
from scheduler.advice import advice_sentence
from scheduler.backends.base import BackendError
from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, TERMINAL_STATES, JobState
from scheduler.clusters.dispatch import output_of
from scheduler.clusters.logs import job_log_sources, read_job_log
from scheduler.jobs.array_verbs import ARRAY_VERBS
from scheduler.jobs.blockers import blockers_for_api
from scheduler.jobs.mail_type import mail_type_text
from scheduler.models import ESTIMATE_FIELDS, Job, JobFiles
from scheduler.reads import reports
from scheduler.reads.arrays import (
    ArraySummary,
    array_summary,
    display_id,
)
from scheduler.reads.positions import QueueLine
from scheduler.reads.sharing import share_costs
from web.jobs.submit import shown_blockers
from web.words import queue_position, request_shape, signed, starts_in


def visible_job(request: HttpRequest, job_id: int) -> Job:
    base = Job.objects.select_related("owner", "account", "qos", "cluster")
    return get_object_or_404(visible_jobs(request.user, base), pk=job_id)


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = visible_job(request, job_id)
    now = timezone.now()
    blockers = shown_blockers(blockers_for_api(job.state, job.pending_blockers, job.pending_reason))
    priority = reports.priority_of(job, now) if job.state == JobState.PENDING else None
    place = QueueLine().place_of(job)
    # The page follows a job that waits (its state, why, its estimate) or runs (its log).
    live = job.state in ACTIVE_STATES | QUEUED_STATES
    metrics = readings.job_series(job, now)
    return render(
        request,
        "web/jobs/detail.html",
        {
            "job": job,
            "events": job.events.order_by("id"),
            "blockers": blockers,
            "priority": priority,
            # nice lowers the priority by itself (a negative nice raises it)
            "nice_effect": signed(-priority.nice) if priority else "",
            "starts_in": starts_in(job.estimated_start_at, now) if job.state == JobState.PENDING else "",
            "qos_limits": qos_limits_text(job.qos) if job.qos else "",
            "shape": request_shape(job.nodes, job.gpus_per_node, job.gpu_model, job.gpu_share),
            "log": read_job_log(job, 16_384) if job.external_id else "",
            "log_sources": log_links(job),
            "live": live,
            "watch": watched_fields(job),
            "place": queue_position(*place) if place else "",
            "next_in_line": place is not None and not place[0],
            "gpu_figure": charts.job_gpu_figure(metrics, (job.started_at, job.ended_at or now))
            if job.started_at and any(m.points for m in metrics)
            else None,
            "files": _files_of(job),
            "output": output_of(job) if job.output_path or job.error_path else None,
            "retention_days": settings.JOB_FILES_RETENTION_DAYS,
            "health_notes": health_notes_for_job(job, now),
            "efficiency": JobEfficiency.objects.filter(job=job, attempt=job.attempt).first(),
            "advice": advice_for(request, job, now),
            "share_costs": share_costs(job),
            "label": display_id(job),
            "mail": {"types": mail_type_text(job.mail_events), "told": told_of(job.mail_events)},
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


def advice_for(request: HttpRequest, job: Job, now: datetime) -> str:
    """The right-sizing advice for requests like ``job``'s, in words, for its owner alone
    (it speaks of their jobs); ``""`` for anyone else (see ``advice_sentence``). Cached
    (``scheduler.advice``): a view replays nothing the previous one did."""
    if job.owner_id != request.user.pk:
        return ""
    return advice_sentence(
        job.owner_id,
        nodes=job.nodes,
        gpus_per_node=job.gpus_per_node,
        gpu_share=job.gpu_share,
        walltime_seconds=job.walltime_seconds,
        gpu_model=job.gpu_model,
        cluster_id=job.cluster_id,
        now=now,
    )


def log_links(job: Job) -> list[dict[str, Any]]:
    """Each log the job has (every rank's together, each rank's stdout and stderr where
    the cluster keeps them apart): its name, where to download it whole (the API's
    streamed download, which the page's session may use) and its query, which the
    page's script follows from offsets. [] before it starts, or when the workload manager
    cannot say now (the tail above still shows)."""
    if not job.external_id:
        return []
    try:
        sources = job_log_sources(job)
    except BackendError:
        return []
    links = []
    for source in sources:
        query: dict[str, str | int] = {"stream": source.stream}
        if source.rank is not None:
            query["rank"] = source.rank
        links.append(
            {
                "label": source.label,
                "query": urlencode(query),
                "download": f"{reverse('job-log-download', args=[job.id])}?{urlencode(query)}",
            }
        )
    return links


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


def watched_fields(job: Job) -> str:
    """A short digest of what the page shows of a job and the scheduler changes on its own:
    its state, why it waits and when it should start. The page reloads when it differs.
    Not its place in line: that moves on most ticks of a busy queue, and a reload each
    time (and a read of the whole line every 3 s for each open page) would cost more than
    a place a few ticks old."""
    estimates = [at.isoformat() if at else None for at in (getattr(job, name) for name in ESTIMATE_FIELDS)]
    shown = [job.state, job.pending_reason, job.pending_blockers, *estimates]
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()[:16]


@login_required
@require_GET
def job_log(request: HttpRequest, job_id: int) -> JsonResponse:
    """The log tail, state and ``watch`` digest (``watched_fields``), for the detail page's
    refresh while the job waits or runs."""
    job = visible_job(request, job_id)
    return JsonResponse(
        {
            "state": job.state,
            "watch": watched_fields(job),
            "log": read_job_log(job, 16_384) if job.external_id else "",
        }
    )
