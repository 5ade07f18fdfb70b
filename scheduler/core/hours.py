"""A job attempt's GPU time split by clock hour, and how long it waited: what the
per-account hourly rollups (``scheduler.models.AccountHour``) add up.

An *attempt* is one run of a job, from ``started`` (running at the backend) to ``ended``
(it ended, or was requeued and gave its GPUs back). Its GPU-seconds are split over the
UTC hours it spans, so GPU-hours over any range of whole hours is a sum of hour rows,
whatever the number of jobs. Two counters make "how many attempts ran in the range"
a sum too: ``carried`` (running at the hour's start) and ``started`` (started within the
hour and ran for some time); attempts with time in ``[S, E)`` are ``carried(S) +`` the
``started`` of every hour in ``[S, E)``.

Pure: datetimes in, plain data out; imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)

#: Wait-time bins (``started - submitted``): (upper bound, label); the last is open.
#: ``AccountHour`` stores one counter per bin (``waited_0`` ...): changing the bins needs
#: a migration that rebuilds the rollups.
WAIT_BINS: tuple[tuple[timedelta | None, str], ...] = (
    (timedelta(minutes=1), "< 1 min"),
    (timedelta(minutes=5), "1-5 min"),
    (timedelta(minutes=15), "5-15 min"),
    (timedelta(hours=1), "15-60 min"),
    (timedelta(hours=4), "1-4 h"),
    (timedelta(hours=12), "4-12 h"),
    (timedelta(days=1), "12-24 h"),
    (None, "> 1 day"),
)


def floor_hour(at: datetime) -> datetime:
    """The start of the UTC hour holding ``at``."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def ceil_hour(at: datetime) -> datetime:
    """The first hour boundary at or after ``at``."""
    floor = floor_hour(at)
    return floor if floor == at else floor + HOUR


def wait_bin(wait: timedelta) -> int:
    """The index in ``WAIT_BINS`` of a wait (a negative wait, clock skew, counts as none)."""
    for i, (bound, _) in enumerate(WAIT_BINS):
        if bound is None or wait < bound:
            return i
    raise AssertionError("the last bin is open")


def job_gpus(nodes: int, gpus_per_node: int, gpu_share: float) -> float:
    """GPUs a job (or one attempt of it) holds: ``nodes x gpus_per_node``, or ``nodes x
    gpu_share`` for a share of one GPU per node. The one rule for "a job's GPUs":
    ``Job.total_gpus`` and ``PendingJob.gpu_amount`` call it, and
    ``common.db.dbfunctions.job_gpus`` counts the same in SQL."""
    return nodes * gpu_share if gpu_share > 0 else float(nodes * gpus_per_node)


def gpu_count(amount: float) -> int | float:
    """A GPU amount for people and JSON: ``4`` for whole GPUs, ``2.5`` with shares."""
    rounded = round(amount, 3)
    return int(rounded) if rounded == int(rounded) else rounded


@dataclass(frozen=True, slots=True)
class HourShare:
    """What one attempt adds to one hour's row."""

    hour: datetime
    gpu_seconds: float
    carried: int  # 1 when the attempt was running at the hour's start
    started: int  # 1 in the hour it started, if it ran for some time
    waited: int | None  # its wait bin, in the hour it started; else None


def split_attempt(started: datetime, ended: datetime, gpus: float, submitted: datetime) -> list[HourShare]:
    """The rows an attempt adds to: one per hour in ``[floor(started), ceil(ended))``.

    An attempt that ran no time (``ended <= started``) adds only its wait, to the hour
    it started in: it is not counted as having run, as it held no GPU-time.
    """
    first = floor_hour(started)
    waited = wait_bin(started - submitted)
    if ended <= started:
        return [HourShare(first, 0.0, 0, 0, waited)]
    shares = []
    hour = first
    while hour < ended:
        seconds = (min(ended, hour + HOUR) - max(started, hour)).total_seconds()
        is_first = hour == first
        shares.append(
            HourShare(hour, gpus * seconds, 0 if is_first else 1, 1 if is_first else 0, waited if is_first else None)
        )
        hour += HOUR
    return shares


@dataclass(slots=True)
class HourTotals:
    """One (key, hour) row being added up."""

    gpu_seconds: float = 0.0
    carried: int = 0
    started: int = 0
    waited: list[int] | None = None

    def add(self, share: HourShare) -> None:
        self.gpu_seconds += share.gpu_seconds
        self.carried += share.carried
        self.started += share.started
        if share.waited is not None:
            if self.waited is None:
                self.waited = [0] * len(WAIT_BINS)
            self.waited[share.waited] += 1


def add_up(
    attempts: Iterable[tuple[object, datetime, datetime, float, datetime]],
) -> dict[tuple[object, datetime], HourTotals]:
    """(key, hour) -> totals of ``(key, started, ended, gpus, submitted)`` attempts (the
    rebuild of the rollups from stored jobs, and the live share of running jobs)."""
    totals: dict[tuple[object, datetime], HourTotals] = {}
    for key, started, ended, gpus, submitted in attempts:
        for share in split_attempt(started, ended, gpus, submitted):
            totals.setdefault((key, share.hour), HourTotals()).add(share)
    return totals
