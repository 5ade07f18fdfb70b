"""Slurm's priority/multifactor plugin, for GPU jobs, as pure functions.

A pending job's priority is a weighted sum of factors, each in ``[0, 1]``, less its
nice value (https://slurm.schedmd.com/priority_multifactor.html)::

    priority = w_age * age + w_fairshare * fairshare + w_jobsize * jobsize + w_qos * qos
             + w_shortness * shortness + w_stretch * stretch - nice

* ``age``: time since submission over ``max_age`` (``PriorityMaxAge``), capped at 1.
* ``fairshare``: the Fair Tree factor of the job's ``(account, user)``
  (:func:`scheduler.core.fairshare.fair_tree_factors`).
* ``jobsize``: requested GPUs over the cluster's GPUs, ``x``; ``1 - x`` when small jobs are
  favoured (``PriorityFavorSmall``), else ``x``.
* ``qos``: the QOS priority over the highest QOS priority.
* ``shortness`` (not in Slurm): how short the job is expected to run, on a log scale
  (:func:`shortness_factor`): its walltime times what its user's (else its account's)
  ended jobs ran of theirs (``Snapshot.runtime_ratios``, from
  ``scheduler.core.prediction``). Under overload, running short jobs first is what
  cuts the mean completion time, and what keeps the slowdowns of teams with short and
  with long jobs alike.
* ``stretch`` (not in Slurm): how far the job's wait has come toward ``stretch_target``
  times its walltime, capped at 1 (:func:`stretch_factor`). Shortness alone would make
  long jobs absorb all of an overload; this lifts a job whose wait is growing past the
  target above fresh short jobs, so every team's slowdown stays near it (Tiresias
  promotes starving jobs in the same spirit). It measures against the walltime the
  user asked for, not the predicted run time: measured on the Philly window, the
  predicted times lowered Jain's index at 40 x 8 GPUs from 0.871 to 0.717 (a team
  whose jobs end early would be lifted later and wait longer).

Partition and TRES factors are not modelled. Unlike Slurm, totals stay floats (Slurm
truncates to a 32-bit integer and floors at 1), so small fair-share differences still
order jobs; ``sprio`` shows the same weighted factors as :class:`PriorityBreakdown`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.types import NodeView, PendingJob

#: Slurm's default ``PriorityMaxAge``.
DEFAULT_MAX_AGE = timedelta(days=7)
#: Jobs expected to run this long or longer get no shortness factor (a week: the
#: longest walltime most sites allow).
DEFAULT_SHORTNESS_HORIZON = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class PriorityWeights:
    """Weights of each factor (Slurm's ``PriorityWeight*``) and the age cap.

    The defaults let fair-share dominate and age, size and QOS break its ties. Raises
    ``ValueError`` on a negative or non-finite weight or a ``max_age`` that is not positive.
    """

    age: float = 1000.0
    fairshare: float = 10000.0
    jobsize: float = 1000.0
    qos: float = 1000.0
    max_age: timedelta = DEFAULT_MAX_AGE
    favor_small: bool = True
    #: Weight of :func:`shortness_factor` (0: off, as in Slurm) and its horizon.
    shortness: float = 0.0
    shortness_horizon: timedelta = DEFAULT_SHORTNESS_HORIZON
    #: Weight of :func:`stretch_factor` (0: off) and the wait, in walltimes, it aims at.
    stretch: float = 0.0
    stretch_target: float = 2.0

    def __post_init__(self) -> None:
        for name in ("age", "fairshare", "jobsize", "qos", "shortness", "stretch"):
            value = getattr(self, name)
            if not value >= 0.0 or math.isinf(value):  # `not >=` also catches NaN
                raise ValueError(f"weight {name} must be a finite number >= 0, got {value!r}")
        if self.max_age <= timedelta(0):
            raise ValueError(f"max_age must be positive, got {self.max_age}")
        if not self.stretch_target > 0 or math.isinf(self.stretch_target):
            raise ValueError(f"stretch_target must be a finite number > 0, got {self.stretch_target!r}")
        if self.shortness_horizon <= timedelta(0):
            raise ValueError(f"shortness_horizon must be positive, got {self.shortness_horizon}")

    @property
    def expects_run_times(self) -> bool:
        """Whether a factor needs expected run times (``Snapshot.runtime_ratios``): only
        shortness does (stretch counts in walltimes)."""
        return bool(self.shortness)


@dataclass(slots=True)
class PriorityBreakdown:
    """A job's priority and its weighted factors, as the columns of ``sprio``.

    ``total == age + fairshare + jobsize + qos + shortness + stretch - nice``.

    Read-only by convention but not ``frozen``, as :class:`~scheduler.core.types.Blocker`
    and for the same reason: a cycle builds one per waiting job, and a frozen dataclass
    is about 4x slower to build.
    """

    job_id: int
    total: float
    age: float
    fairshare: float
    jobsize: float
    qos: float
    nice: int
    shortness: float = 0.0
    stretch: float = 0.0


def age_factor(submitted_at: datetime, now: datetime, max_age: timedelta = DEFAULT_MAX_AGE) -> float:
    """``min(age, max_age) / max_age``; a job submitted after ``now`` has age 0."""
    age = max((now - submitted_at).total_seconds(), 0.0)
    return min(age, max_age.total_seconds()) / max_age.total_seconds()


def job_size_factor(gpus: int, cluster_gpus: int, favor_small: bool = True) -> float:
    """``x = min(gpus, cluster_gpus) / cluster_gpus``; ``1 - x`` if ``favor_small``, else ``x``.

    With no GPUs in the cluster every job has ``x = 0``, so all jobs get the same factor.
    """
    x = min(max(gpus, 0), cluster_gpus) / cluster_gpus if cluster_gpus > 0 else 0.0
    return 1.0 - x if favor_small else x


def qos_factor(qos: str, qos_priorities: Mapping[str, int]) -> float:
    """``qos_priorities[qos] / max(qos_priorities)``; 0.0 for an unknown QOS or no positive maximum.

    Negative priorities count as 0.
    """
    highest = max(qos_priorities.values(), default=0)
    if highest <= 0:
        return 0.0
    return max(qos_priorities.get(qos, 0), 0) / highest


def shortness_factor(expected_s: float, horizon_s: float) -> float:
    """``1 - log(1 + expected) / log(1 + horizon)``, in ``[0, 1]``: 1 for a job expected
    to end at once, 0 from the horizon on. On a log scale, so that 1 h against 4 h
    counts as much as 4 h against 16 h: run times span five orders of magnitude.
    """
    if expected_s <= 0:
        return 1.0
    if expected_s >= horizon_s:
        return 0.0
    return 1.0 - math.log1p(expected_s) / math.log1p(horizon_s)


#: Walltimes shorter than this count as this long in the stretch factor (the 10 s floor
#: of bounded slowdown): a job asking for a second still waits a little.
STRETCH_FLOOR_S = 10.0


def stretch_factor(waited_s: float, walltime_s: float, target: float) -> float:
    """``min(1, waited / (target * walltime))``: 1 once a job has waited ``target`` times
    the walltime it asked for (at least :data:`STRETCH_FLOOR_S`)."""
    return min(1.0, max(waited_s, 0.0) / (target * max(walltime_s, STRETCH_FLOOR_S)))


def expected_ratio(ratios: Mapping[tuple[str, str], float], account: str, user: str) -> float:
    """What jobs of ``(account, user)`` are expected to run of their walltime: the
    user's ratio, else the account's (``(account, "")``), else 1."""
    ratio = ratios.get((account, user))
    if ratio is None:
        ratio = ratios.get((account, ""), 1.0)
    return ratio


def cluster_gpu_count(nodes: Iterable[NodeView]) -> int:
    """All GPUs of the nodes, whatever their state: the denominator of the size factor."""
    return sum(len(node.gpus) for node in nodes)


def job_priority(
    job: PendingJob,
    *,
    now: datetime,
    weights: PriorityWeights,
    fairshare: Mapping[tuple[str, str], float],
    qos_priorities: Mapping[str, int],
    cluster_gpus: int,
    runtime_ratios: Mapping[tuple[str, str], float] | None = None,
) -> PriorityBreakdown:
    """The multifactor priority of one pending job.

    ``fairshare`` maps ``(account, user)`` to its factor; a job whose association is
    missing gets 0.0. Raises ``ValueError`` if the job's fair-share factor is outside
    ``[0, 1]``.
    """
    (breakdown,) = priority_breakdowns(
        [job],
        now=now,
        weights=weights,
        fairshare=fairshare,
        qos_priorities=qos_priorities,
        cluster_gpus=cluster_gpus,
        runtime_ratios=runtime_ratios,
    )
    return breakdown


class PriorityCalculator:
    """The multifactor priority of pending jobs at one instant (``sprio`` for the queue).

    The same numbers as :func:`job_priority` per job, but the factors that depend only on
    a job's QOS, size or association are computed once per distinct value: a cycle over
    100,000 jobs pays for a few hundred of them. One home for the arithmetic, so a cycle
    that orders the whole queue and one that walks a kept queue
    (``scheduler.core.queue``) rank jobs with the very same floats.
    """

    def __init__(
        self,
        *,
        now: datetime,
        weights: PriorityWeights,
        fairshare: Mapping[tuple[str, str], float],
        qos_priorities: Mapping[str, int],
        cluster_gpus: int,
        runtime_ratios: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        self.now = now
        self.runtime_ratios = runtime_ratios or {}
        self.horizon = weights.shortness_horizon.total_seconds()
        #: (account, user, walltime) -> weighted shortness
        self.shortness_parts: dict[tuple[str, str, int], float] = {}
        self.weights = weights
        self.fairshare = fairshare
        self.qos_priorities = qos_priorities
        self.cluster_gpus = cluster_gpus
        self.max_age = weights.max_age.total_seconds()
        self.qos_parts: dict[str, float] = {}
        self.size_parts: dict[int, float] = {}
        self.fairshare_parts: dict[tuple[str, str], float] = {}

    def breakdown(self, job: PendingJob) -> PriorityBreakdown:
        """``job``'s priority now. Raises ``ValueError`` if its fair-share factor is
        outside ``[0, 1]``."""
        weights = self.weights
        key = (job.account, job.user)
        fairshare_part = self.fairshare_parts.get(key)
        if fairshare_part is None:
            fs = self.fairshare.get(key, 0.0)
            if not 0.0 <= fs <= 1.0:
                raise ValueError(f"fair-share factor of {key!r} must be in [0, 1], got {fs!r}")
            fairshare_part = self.fairshare_parts[key] = weights.fairshare * fs
        qos = self.qos_parts.get(job.qos)
        if qos is None:
            qos = self.qos_parts[job.qos] = weights.qos * qos_factor(job.qos, self.qos_priorities)
        gpus = job.gpus
        jobsize = self.size_parts.get(gpus)
        if jobsize is None:
            jobsize = self.size_parts[gpus] = weights.jobsize * job_size_factor(
                gpus, self.cluster_gpus, weights.favor_small
            )
        waited = (self.now - job.submitted_at).total_seconds()
        shortness = stretch = 0.0
        if weights.shortness:
            expected_key = (job.account, job.user, job.walltime_seconds)
            cached = self.shortness_parts.get(expected_key)
            if cached is None:
                expected = job.walltime_seconds * expected_ratio(self.runtime_ratios, job.account, job.user)
                cached = self.shortness_parts[expected_key] = weights.shortness * shortness_factor(
                    expected, self.horizon
                )
            shortness = cached
        if weights.stretch:
            stretch = weights.stretch * stretch_factor(waited, job.walltime_seconds, weights.stretch_target)
        max_age = self.max_age
        age = weights.age * (min(max(waited, 0.0), max_age) / max_age)
        total = age + fairshare_part + jobsize + qos + shortness + stretch - job.nice
        return PriorityBreakdown(job.id, total, age, fairshare_part, jobsize, qos, job.nice, shortness, stretch)


def priority_breakdowns(
    jobs: Iterable[PendingJob],
    *,
    now: datetime,
    weights: PriorityWeights,
    fairshare: Mapping[tuple[str, str], float],
    qos_priorities: Mapping[str, int],
    cluster_gpus: int,
    runtime_ratios: Mapping[tuple[str, str], float] | None = None,
) -> list[PriorityBreakdown]:
    """:func:`job_priority` of every job, in the order given, by one
    :class:`PriorityCalculator`."""
    calculator = PriorityCalculator(
        now=now,
        weights=weights,
        fairshare=fairshare,
        qos_priorities=qos_priorities,
        cluster_gpus=cluster_gpus,
        runtime_ratios=runtime_ratios,
    )
    breakdown = calculator.breakdown
    return [breakdown(job) for job in jobs]


def order_by_priority(jobs: Sequence[PendingJob], breakdowns: Iterable[PriorityBreakdown]) -> list[PendingJob]:
    """``jobs`` highest priority first; equal priorities: older submission first, then lower id.

    Raises ``ValueError`` if a job has no breakdown.
    """
    totals = {b.job_id: b.total for b in breakdowns}
    missing = [job.id for job in jobs if job.id not in totals]
    if missing:
        raise ValueError(f"no priority for jobs {missing}")
    return sorted(jobs, key=lambda job: (-totals[job.id], job.submitted_at, job.id))
