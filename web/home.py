"""The dashboard: a researcher's running and waiting jobs, recent ones, their share."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import render
from django.templatetags.static import static
from django.utils import timezone
from django.views.decorators.http import require_GET

from people.access import visible_jobs
from people.models import Account
from scheduler.choices import JobState
from scheduler.models import Job
from scheduler.reads import reports
from scheduler.reads.positions import QueueLine
from web import figures
from web.words import queue_position, starts_in


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
        "web/dashboard.html",
        {
            "states": states,
            "total_jobs": sum(by_state.values()),
            "share_rows": share_rows,
            "quota_rows": figures.quota_use(accounts),
            "capacity": figures.free_gpus_by_model(),
            "upcoming": [(job, starts_in(job.estimated_start_at, now)) for job in upcoming],
            "recent": _with_places(recent),
            "accounts": accounts,
        },
    )


def _with_places(jobs: list[Job]) -> list[tuple[Job, str]]:
    """Each job with its place in the last tick's line in words (``""``: none)."""
    places = QueueLine().places_of(jobs)
    return [(job, queue_position(*places[job.id]) if job.id in places else "") for job in jobs]


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


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on pages that name no icon (the admin, the
    API's): the portal's icon, the one ``base.html`` links, rather than a 404 each time."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))
