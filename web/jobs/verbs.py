"""The buttons on a job and on an array: cancel, hold, release, requeue, throttle."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from people.access import visible_jobs
from scheduler.api.arrays import ThrottleSerializer
from scheduler.jobs import verbs
from scheduler.jobs.array_verbs import ARRAY_VERBS, set_throttle
from scheduler.jobs.transitions import JobStateConflict
from scheduler.models import Job
from web.jobs.detail import visible_job

VERBS = {"cancel", "hold", "release", "requeue"}


PAST = {"cancel": "cancelled", "hold": "held", "release": "released", "requeue": "requeued"}


@login_required
@require_POST
def job_verb(request: HttpRequest, job_id: int, verb: str) -> HttpResponse:
    if verb not in VERBS:
        raise Http404("No such action.")
    job = visible_job(request, job_id)
    try:
        getattr(verbs, f"{verb}_job")(job, by=request.user.get_username())
    except JobStateConflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job {job.id} {PAST[verb]}.")
    return redirect("web:job-detail", job_id=job.id)


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
