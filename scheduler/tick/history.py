"""What the overload policies learn from the jobs' past: run-time ratios of ended jobs
(the shortness and stretch priority factors) and the service requeued jobs already had
(least-attained-service preemption). Read only when the policy uses them."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import F

from scheduler.choices import ACTIVE_STATES, JobState
from scheduler.core.prediction import RuntimePredictor
from scheduler.models import JobAttempt

#: The latest ended jobs the predictor reads (per tick; one indexed query).
RUNTIME_HISTORY = 5_000
#: Jobs whose run tells how long their kind of job runs: ended on their own. Cancelled,
#: preempted and node-failed runs were cut short by someone or something else.
INFORMATIVE_ENDS = (JobState.COMPLETED, JobState.FAILED, JobState.TIMEOUT)


def load_runtime_ratios(limit: int = RUNTIME_HISTORY) -> dict[tuple[str, str], float]:
    """``Snapshot.runtime_ratios`` from the last run of the latest ``limit`` jobs that
    ended on their own (see :func:`load_runtime_predictor`)."""
    return load_runtime_predictor(limit).ratios


def load_runtime_predictor(limit: int = RUNTIME_HISTORY) -> RuntimePredictor:
    """A :class:`RuntimePredictor` fed the last run of the latest ``limit`` jobs that
    ended on their own, oldest first: its ``ratios`` rank jobs, its ``samples`` give the
    calibrated starts their quantiles."""
    rows = list(
        JobAttempt.objects.filter(job__state__in=INFORMATIVE_ENDS, attempt=F("job__attempt"))
        .order_by("-ended_at", "-id")
        .values_list("account__name", "owner__username", "job__walltime_seconds", "started_at", "ended_at")[:limit]
    )
    predictor = RuntimePredictor()
    for account, user, walltime, started, ended in reversed(rows):
        predictor.observe(account, user, walltime, (ended - started).total_seconds())
    return predictor


def load_attained_service() -> dict[int, int]:
    """GPU-seconds each waiting or running job had in its ended attempts: only a job
    requeued (after an eviction or a node failure) has any, so one query over the
    attempts of jobs in those states finds them all."""
    attained: dict[int, float] = defaultdict(float)
    states = [JobState.PENDING, *ACTIVE_STATES]
    rows = JobAttempt.objects.filter(job__state__in=states).values_list("job_id", "gpus", "started_at", "ended_at")
    for job_id, gpus, started, ended in rows:
        attained[job_id] += gpus * max((ended - started).total_seconds(), 0.0)
    return {job_id: int(value) for job_id, value in attained.items()}
