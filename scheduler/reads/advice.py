"""Right-sizing advice, the read: which of a user's ended jobs are of a shape, what they
used of what they asked, the smaller request that would have fitted them, and the
sentence, the payload and the page box say it with.

A **shape** is what a person asks for again and again: the GPUs in all (and their model
when named), a walltime in the same band (up to 1 h, 4 h, 12 h, 1 day, 3 days, longer),
on the same cluster when one is known. Only jobs that ran to their end (``COMPLETED``)
or to their walltime (``TIMEOUT``) say what the shape needs: a failed or cancelled run
ended early for other reasons.

What "started sooner" the smaller request would have bought is measured by replaying
the site's history (``scheduler.advice``, which calls this module); here it is only a
figure to put in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F

from monitoring.utilization import measured_busy_gpus
from scheduler.choices import JobState
from scheduler.core.limits import duration_text
from scheduler.models import Job

#: Upper ends of the walltime bands, seconds; past the last, one band.
WALLTIME_BANDS_S = (3600, 4 * 3600, 12 * 3600, 24 * 3600, 72 * 3600)
#: The states whose run says what the shape needed.
TELLING_STATES = (JobState.COMPLETED, JobState.TIMEOUT)
#: The suggested walltime: the 95th percentile of the runs, with this margin, rounded up.
MARGIN = 1.25
PERCENTILE = 95


@dataclass(frozen=True, slots=True)
class Shape:
    """What a request asks for, as far as the advice tells requests apart."""

    gpus: int
    band: int
    gpu_model: str = ""
    cluster_id: int | None = None

    @property
    def key(self) -> str:
        """Stable words for a cache key."""
        return f"{self.gpus}:{self.band}:{self.gpu_model}:{self.cluster_id or ''}"


def walltime_band(walltime_s: int) -> int:
    """The index of the band ``walltime_s`` falls in (see :data:`WALLTIME_BANDS_S`)."""
    return next((i for i, top in enumerate(WALLTIME_BANDS_S) if walltime_s <= top), len(WALLTIME_BANDS_S))


def shape_of(gpus: int, walltime_s: int, gpu_model: str = "", cluster_id: int | None = None) -> Shape:
    return Shape(gpus, walltime_band(walltime_s), gpu_model, cluster_id)


def job_shape(job: Job) -> Shape:
    return shape_of(job.nodes * job.gpus_per_node, job.walltime_seconds, job.gpu_model, job.cluster_id)


@dataclass(frozen=True, slots=True)
class Run:
    """One ended job of a shape: what it asked, how long it ran, how many GPUs it kept
    busy (``None``: unmeasured)."""

    job_id: int
    walltime_s: int
    elapsed_s: int
    gpus: int
    gpus_busy: int | None
    submitted_at: datetime


def runs_of(owner_id: int, shape: Shape, *, since: datetime, limit: int) -> list[Run]:
    """``owner_id``'s last ``limit`` jobs of ``shape`` that ended after ``since`` in a
    telling state, the latest first (ties by id). Two queries."""
    low = WALLTIME_BANDS_S[shape.band - 1] if shape.band else 0
    jobs = (
        Job.objects.alias(gpus=F("nodes") * F("gpus_per_node"))
        .filter(
            owner_id=owner_id,
            state__in=TELLING_STATES,
            started_at__isnull=False,
            ended_at__gte=since,
            gpus=shape.gpus,
            gpu_share=0,
            gpu_model=shape.gpu_model,
            walltime_seconds__gt=low,
        )
        .order_by("-ended_at", "-id")
    )
    if shape.band < len(WALLTIME_BANDS_S):
        jobs = jobs.filter(walltime_seconds__lte=WALLTIME_BANDS_S[shape.band])
    if shape.cluster_id is not None:
        jobs = jobs.filter(cluster_id=shape.cluster_id)
    rows = list(jobs.values_list("id", "walltime_seconds", "started_at", "ended_at", "submitted_at")[:limit])
    busy = measured_busy_gpus(row[0] for row in rows)
    return [
        Run(job_id, walltime, max(0, int((ended - started).total_seconds())), shape.gpus, busy.get(job_id), submitted)
        for job_id, walltime, started, ended, submitted in rows
        if started is not None and ended is not None  # excluded by the query; keeps the types honest
    ]


# --- The suggestion ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Suggestion:
    """What ``jobs`` runs of a shape used, and the request that would have fitted them."""

    jobs: int
    #: Mean of each run's elapsed time over its walltime.
    walltime_used: float
    gpus_asked: int
    #: The most GPUs any measured run kept busy; ``None``: none was measured.
    gpus_used: int | None
    #: The longest walltime any of the runs asked for.
    walltime_asked_s: int
    walltime_s: int
    gpus: int

    @property
    def smaller(self) -> bool:
        """Whether it asks for less than the runs did (else there is nothing to advise)."""
        return self.gpus < self.gpus_asked or self.walltime_s < self.walltime_asked_s


def suggested_walltime(elapsed_s: list[int], asked_s: int) -> int:
    """The 95th percentile of ``elapsed_s`` (linear interpolation) times :data:`MARGIN`,
    rounded up to a quarter hour below 4 h and to the hour from there, never more than
    ``asked_s``: a walltime that the runs would all but never have hit."""
    ordered = sorted(elapsed_s)
    position = (len(ordered) - 1) * PERCENTILE / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    p95 = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    wanted = max(1.0, p95 * MARGIN)
    unit = 900 if wanted < 4 * 3600 else 3600
    return min(asked_s, math.ceil(wanted / unit) * unit)


def suggested_gpus(busy: list[int], asked: int) -> int:
    """The most GPUs a run kept busy, rounded up to a power of two (1, 2, 4, 8...), at
    least 1 and never more than ``asked``; ``asked`` when no run was measured."""
    if not busy:
        return asked
    return min(asked, 1 << max(0, max(busy) - 1).bit_length())


def suggest(runs: list[Run], min_jobs: int) -> Suggestion | None:
    """The suggestion from ``runs`` (one shape); ``None`` on fewer than ``min_jobs``: too
    few runs say nothing."""
    if len(runs) < min_jobs or not runs:
        return None
    busy = [run.gpus_busy for run in runs if run.gpus_busy is not None]
    walltime_asked = max(run.walltime_s for run in runs)
    gpus_asked = max(run.gpus for run in runs)
    return Suggestion(
        jobs=len(runs),
        walltime_used=sum(min(1.0, run.elapsed_s / run.walltime_s) for run in runs) / len(runs),
        gpus_asked=gpus_asked,
        gpus_used=max(busy) if busy else None,
        walltime_asked_s=walltime_asked,
        walltime_s=suggested_walltime([run.elapsed_s for run in runs], walltime_asked),
        gpus=suggested_gpus(busy, gpus_asked),
    )


# --- Said ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Advice:
    """A suggestion and what it would have bought: ``sooner_s``, how much sooner its jobs
    would have started on average in the replay of the site's history (``None`` when
    the suggestion asks for no less, so nothing was replayed, or while ``pending``: the
    replay is being run)."""

    suggestion: Suggestion
    sooner_s: float | None
    #: The days of the site's history the replay covered (``None``: none was run yet).
    replayed_days: float | None = None
    pending: bool = False


def hours_text(seconds: float) -> str:
    """``7560`` -> ``"2.1 h"``, ``1500`` -> ``"25 min"``: a saving, the way people say one."""
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def advice_words(advice: Advice) -> str:
    """The sentence the API, the job page, the submit form and ``qm`` show."""
    s = advice.suggestion
    used = f"your last {s.jobs} jobs of this shape used {round(100 * s.walltime_used)}% of their walltime"
    if s.gpus_used is not None:
        used += f" and {s.gpus_used} of {s.gpus_asked} GPUs"
    if not s.smaller:
        return f"{used[0].upper()}{used[1:]}; what they asked for fits them."
    ask = f"asking {duration_text(s.walltime_s)} and {s.gpus} GPU{'s' if s.gpus != 1 else ''}"
    sooner = advice.sooner_s or 0.0
    if advice.pending:
        gain = "might have started them sooner: the replay of this site's history that says how much is under way"
    elif sooner < 60:
        gain = "would not have started them sooner in a replay of this site's history"
    else:
        gain = f"would have started them {hours_text(sooner)} sooner on average"
    return f"{used[0].upper()}{used[1:]}; {ask} {gain}."


def advice_payload(advice: Advice | None, min_jobs: int) -> dict[str, Any]:
    """The API's shape of ``advice`` (``None``: too few jobs of the shape to say)."""
    if advice is None:
        return {"advice": None, "min_jobs": min_jobs}
    s = advice.suggestion
    return {
        "advice": {
            "words": advice_words(advice),
            "jobs": s.jobs,
            "walltime_used": round(s.walltime_used, 4),
            "gpus_asked": s.gpus_asked,
            "gpus_used": s.gpus_used,
            "walltime_asked_seconds": s.walltime_asked_s,
            "suggested_walltime_seconds": s.walltime_s,
            "suggested_gpus": s.gpus,
            "started_sooner_seconds": None if advice.sooner_s is None else round(advice.sooner_s, 1),
            "replayed_days": None if advice.replayed_days is None else round(advice.replayed_days, 2),
            "pending": advice.pending,
        },
        "min_jobs": min_jobs,
    }
