"""Right-sizing advice: what a user's ended jobs of a shape used of what they asked, the
smaller request that would have fitted them (``scheduler.reads.advice``), and how much
sooner that request would have started them, measured, not guessed: the site's last
``ADVICE_DAYS`` of history replayed as it ran and with those jobs asking for the
suggestion instead, as an account preview does (``scheduler.previews``).

The replay is heavy (two replays of the site's history: seconds to minutes on a busy
site), so a page or API read never runs it: on a miss it asks the Celery task
``scheduler.advise`` for it (once per web process: a marker in its cache keeps a second
read from asking again; inline without a broker) and answers with the suggestion alone,
its saving ``pending``. The task stores what it measured as an
:class:`~scheduler.models.AdviceMeasurement` row, which every web process reads, for
``ADVICE_CACHE_SECONDS``; its key names the latest of the jobs it read, so a job of the
shape that ends makes the next read ask afresh. Fewer than ``ADVICE_MIN_JOBS`` ended
jobs of the shape: no advice, and no replay.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from scheduler.jobs.remote import after_commit
from scheduler.models import AdviceMeasurement
from scheduler.previews import site_as_now, site_history
from scheduler.reads.advice import Advice, Run, Shape, Suggestion, advice_words, runs_of, shape_of, suggest
from scheduler.replay.simulator import Replay, replay
from scheduler.replay.trace import TraceJob

#: How many of a user's latest jobs of a shape an advice reads ("your last 20 jobs").
LAST_JOBS = 20
#: How much of the site's history before the first of those jobs the replay starts with.
LEAD_IN = timedelta(days=1)


def advise(owner_id: int, shape: Shape, now: datetime, *, wait: bool = False) -> Advice | None:
    """The advice for ``owner_id``'s requests of ``shape``: with its saving as measured
    before for the same jobs; else measured here (``wait``: the task) or asked of the
    task after commit, answering with the saving ``pending`` meanwhile. ``None`` on fewer
    than ``ADVICE_MIN_JOBS`` jobs (two cheap queries, nothing stored or asked)."""
    days = settings.ADVICE_DAYS
    runs = runs_of(owner_id, shape, since=now - timedelta(days=days), limit=LAST_JOBS)
    suggestion = suggest(runs, settings.ADVICE_MIN_JOBS)
    if suggestion is None:
        return None
    if not suggestion.smaller:  # nothing to replay: what they asked fits them
        return Advice(suggestion, None)
    key = f"{owner_id}:{shape.key}:{runs[0].job_id}:{len(runs)}:{days}"
    found = _measured(key, now)
    if found is None and wait:
        window = replay_window(runs, now, days)
        found = _store(owner_id, shape, key, started_sooner(runs, suggestion, now, window), window, now)
    # One ask per key and process while it runs (the marker outlives the task's limit).
    if found is None and cache.add(f"advice-asked:{key}", True, settings.PREVIEW_TIME_LIMIT_SECONDS + 60):
        after_commit("scheduler.advise", measure, {"owner_id": owner_id, **asdict(shape)})
        found = _measured(key, now)  # inline without a broker, outside a transaction: done
    if found is None:
        return Advice(suggestion, None, pending=True)
    return Advice(suggestion, found.sooner_seconds, found.replayed_days)


def _measured(key: str, now: datetime) -> AdviceMeasurement | None:
    """The measurement stored for ``key``, unless older than ``ADVICE_CACHE_SECONDS``."""
    fresh = now - timedelta(seconds=settings.ADVICE_CACHE_SECONDS)
    return AdviceMeasurement.objects.filter(key=key, computed_at__gte=fresh).first()


def _store(owner_id: int, shape: Shape, key: str, sooner_s: float, days: float, now: datetime) -> AdviceMeasurement:
    """Keep a measurement, replacing those of the same user and shape (older jobs read)."""
    AdviceMeasurement.objects.filter(owner_id=owner_id, shape=shape.key).exclude(key=key).delete()
    row, _ = AdviceMeasurement.objects.update_or_create(
        key=key,
        defaults={
            "owner_id": owner_id,
            "shape": shape.key,
            "sooner_seconds": sooner_s,
            "replayed_days": days,
            "computed_at": now,
        },
    )
    return row


def measure(request: dict[str, Any]) -> None:
    """The task's work: measure and cache the advice ``request`` names (``owner_id`` and
    the fields of a :class:`Shape`) as of now. Idempotent: a second run finds it cached."""
    shape = {name: value for name, value in request.items() if name != "owner_id"}
    advise(int(request["owner_id"]), Shape(**shape), timezone.now(), wait=True)


def advice_sentence(
    owner_id: int,
    *,
    nodes: int,
    gpus_per_node: int,
    gpu_share: float,
    walltime_seconds: int,
    gpu_model: str,
    cluster_id: int | None,
    now: datetime,
) -> str:
    """The advice for a request, in words, for the pages (the job page, the submit form's
    estimate); ``""`` for a request of no whole GPUs (CPU-only or a GPU share: there is
    nothing to right-size) and on too few ended jobs of its shape."""
    if gpus_per_node == 0 or gpu_share:
        return ""
    found = advise(owner_id, shape_of(nodes * gpus_per_node, walltime_seconds, gpu_model, cluster_id), now)
    return advice_words(found) if found else ""


def replay_window(runs: list[Run], now: datetime, days: int) -> float:
    """The days of history to replay for ``runs``: from :data:`LEAD_IN` before the first of
    them was submitted (so the site is as busy as it was when they came) to ``now``, at
    most ``days``. A user whose last 20 jobs came this week costs a week's replay, not
    ``ADVICE_DAYS``'."""
    first = min(run.submitted_at for run in runs)
    return min(float(days), (now - first + LEAD_IN) / timedelta(days=1))


def started_sooner(runs: list[Run], suggestion: Suggestion, now: datetime, days: float) -> float:
    """How much sooner, on average, ``runs``' jobs would have started in a replay of the
    site's last ``days`` with each asking for ``suggestion``'s GPUs and walltime instead
    (negative: later). Those of them the replay does not hold (CPU-only, or submitted
    before the window) do not count; 0.0 when none is held."""
    trace = site_history(now, days)
    ids = {run.job_id for run in runs}
    smaller = [resized(job, suggestion) if job.id in ids else job for job in trace]
    cluster, policy, accounts, limits = site_as_now()
    as_ran, advised = (_waits(replay(t, cluster, policy, limits, accounts), ids) for t in (trace, smaller))
    both = as_ran.keys() & advised.keys()
    return sum(as_ran[i] - advised[i] for i in both) / len(both) if both else 0.0


def resized(job: TraceJob, suggestion: Suggestion) -> TraceJob:
    """``job`` asking for the suggestion: fewer GPUs (as many as it kept busy, so it runs as
    long), a shorter walltime (which kills it if it ran longer, as it would have)."""
    return replace(
        job, gpus=min(job.gpus, suggestion.gpus), walltime_s=min(job.walltime_s, max(1, suggestion.walltime_s))
    )


def _waits(result: Replay, ids: set[int]) -> dict[int, int]:
    """The time each of ``ids`` waited for its first start in ``result``."""
    return {
        r.job.id: (r.first_start_s if r.first_start_s >= 0 else r.start_s) - r.job.submit_s
        for r in result.records
        if r.job.id in ids
    }
