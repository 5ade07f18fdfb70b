"""``/interactive/``: the apps one may launch and one's sessions as cards (queued ->
starting -> running with Connect -> ended, with why); ``/interactive/<slug>/``: an app's
launch form. A card refreshes itself (``static/js/sessions.js``), asking its session's
readiness each time, so Connect shows as soon as the server answers; without
JavaScript, reloading the page does the same."""

from __future__ import annotations

import math
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from scheduler.api.throttles import SubmitThrottle
from scheduler.backends.base import BackendError
from scheduler.jobs.blockers import blockers_for_api
from scheduler.jobs.transitions import JobStateConflict
from scheduler.jobs.verbs import cancel_job
from scheduler.models import InteractiveApp, InteractiveSession
from scheduler.reads.inventory import load_inventory
from scheduler.reads.sessions import QUEUED, session_view, sessions_of
from scheduler.sessions.launch import LaunchRefused, launch_session, offered_apps
from scheduler.sessions.ready import refresh_readiness
from web.interactive.form import LaunchForm
from web.jobs.submit import shown_blockers
from web.words import about, format_walltime, starts_in


def card_context(session: InteractiveSession, problem: str = "") -> dict[str, Any]:
    """What one session's card shows (``templates/web/interactive/card.html``)."""
    now = timezone.now()
    view = session_view(session, now)
    job = session.job
    queued = view.phase == QUEUED
    return {
        "view": view,
        "job": job,
        "app": session.app,
        "starts_in": starts_in(job.estimated_start_at, now) if queued and job.estimated_start_at else "",
        "blockers": shown_blockers(blockers_for_api(job.state, job.pending_blockers, job.pending_reason))
        if queued
        else [],
        "left": about(view.seconds_left) if view.seconds_left is not None else "",
        "walltime": format_walltime(job.walltime_seconds),
        "problem": problem,
    }


@login_required
@require_GET
def interactive(request: HttpRequest) -> HttpResponse:
    """The apps offered now and the user's own sessions (those not ended, and the last
    ended ones)."""
    cards = [card_context(session) for session in sessions_of(request.user)]
    return render(request, "web/interactive/index.html", {"apps": offered_apps(request.user), "cards": cards})


def _offered(request: HttpRequest, slug: str) -> InteractiveApp:
    app = next((app for app in offered_apps(request.user) if app.slug == slug), None)
    if app is None:
        raise Http404("No such app is offered now.")
    return app


@login_required
def launch(request: HttpRequest, slug: str) -> HttpResponse:
    """The app's launch form; a launch that succeeds goes back to the cards."""
    app = _offered(request, slug)
    if request.method == "POST":
        form = LaunchForm(request.POST, app=app, user=request.user)
        if form.is_valid() and _launch_allowed(request, form):
            try:
                session = launch_session(
                    app,
                    request.user,
                    form.values(),
                    form.resources(),
                    account=form.account_chosen(),
                    qos=None,
                    hardware=load_inventory(),
                )
            except LaunchRefused as exc:
                form.add_launch_problems(exc.problems)
            else:
                messages.success(request, f"{app.name} launched as job {session.job_id}.")
                return redirect(reverse("web:interactive") + f"#session-{session.job_id}")
    else:
        form = LaunchForm(app=app, user=request.user)
    return render(request, "web/interactive/launch.html", {"app": app, "form": form})


def _launch_allowed(request: HttpRequest, form: LaunchForm) -> bool:
    """Within ``JOB_SUBMIT_RATE``, as any submission (the API's throttle)."""
    throttle = SubmitThrottle()
    if throttle.allow_request(request, None):  # type: ignore[arg-type]
        return True
    form.add_error(None, f"Too many launches in a short time; launch again in {math.ceil(throttle.wait() or 1)} s.")
    return False


def _own_session(request: HttpRequest, job_id: int) -> InteractiveSession:
    """The user's own session (anyone else's: 404, as if there were none)."""
    sessions = InteractiveSession.objects.select_related("job", "job__cluster", "job__account", "app")
    return get_object_or_404(sessions, pk=job_id, job__owner=request.user)


@login_required
@require_GET
def card(request: HttpRequest, job_id: int) -> HttpResponse:
    """One session's card, after asking once more whether its server answers."""
    session = _own_session(request, job_id)
    problem = ""
    try:
        refresh_readiness(session)
    except BackendError as exc:
        problem = f"Cannot tell whether it answers yet: {exc.message}"
    return render(request, "web/interactive/card.html", card_context(session, problem))


@login_required
@require_POST
def delete(request: HttpRequest, job_id: int) -> HttpResponse:
    """End a session: cancel its job."""
    session = _own_session(request, job_id)
    try:
        cancel_job(session.job, by=request.user.get_username())
    except JobStateConflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Session {job_id} ({session.app.name}) deleted.")
    return redirect("web:interactive")
