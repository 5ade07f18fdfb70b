"""Server-rendered pages. The full researcher portal grows here; for now, a landing page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.access import visible_jobs
from scheduler.models import Job, Node, TickState


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Queue summary for what the user may see, node states and the last tick."""
    jobs = visible_jobs(request.user, Job.objects.all())
    by_state = dict(jobs.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    nodes = dict(Node.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    recent = jobs.select_related("owner", "account").order_by("-id")[:20]
    return render(
        request,
        "portal/home.html",
        {
            "by_state": sorted(by_state.items()),
            "nodes": sorted(nodes.items()),
            "recent": recent,
            "tick": TickState.objects.filter(pk=1).first(),
        },
    )
