"""Seeded synthetic GPU job traces in the Philly CSV layout, for the trace-replay tests.

Why this exists: the replay tests used to read a 2,000-job cut of the Microsoft Philly
trace (CC BY 4.0), which may not be redistributed inside the project. This module makes
a trace of the same shape instead, from ``random.Random(seed)`` alone, so the same seed
gives the same file on every machine and Python 3 version:

- ``job_id`` increasing by one in submission order; ``submit_s`` from 0, the gaps
  exponential with a bursty mixture of two means (a Poisson-like process: 40 % of the
  gaps average 5 s, as in a sweep submitted together; rounding to whole seconds gives
  equal submit times, which the simulator must keep in row order); at the default mean
  gap of 130 s, 2,000 jobs span about three days, as the Philly cut did;
- ``duration_s`` heavy-tailed: log-normal with a median of 10 minutes, so most jobs run
  seconds to minutes and about 1 in 20 runs longer than 4 hours, capped at 14 days;
- ``num_gpus`` from 1 to 64: about 80 % of the jobs on 1 GPU, nearly all the rest on a
  power of two, and a few 12- and 24-GPU jobs (not a multiple of an 8-GPU node, as
  Philly had), all at most ``max_gpus``;
- ``vc`` (the account) one of ``accounts`` distinct 6-hex-digit names, drawn with
  Zipf-like weights: one or two teams submit most jobs, as on Philly.

The columns are :data:`COLUMNS` (``job_id,submit_s,duration_s,num_gpus,vc``), what
``load_philly_csv`` reads.
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path
from typing import NamedTuple

from scheduler.replay.trace import TraceJob, noisy_walltime

COLUMNS = ("job_id", "submit_s", "duration_s", "num_gpus", "vc")

#: GPUs per job and their weights (they need not sum to 1).
GPU_WEIGHTS = {1: 80.0, 2: 7.0, 4: 5.0, 8: 5.0, 12: 0.4, 16: 1.2, 24: 0.3, 32: 0.7, 64: 0.4}

#: Share of the gaps between submissions that are short (a sweep of jobs submitted
#: together) and their mean; the other gaps are longer, keeping the overall mean.
BURST_SHARE = 0.4
BURST_GAP_S = 5.0

MEDIAN_DURATION_S = 600
DURATION_SIGMA = 2.0
MAX_DURATION_S = 14 * 24 * 3600


class TraceRow(NamedTuple):
    """One CSV row: a job as the trace states it."""

    job_id: int
    submit_s: int
    duration_s: int
    num_gpus: int
    vc: str


def synthetic_trace(
    seed: int,
    jobs: int,
    *,
    accounts: int = 10,
    mean_interarrival_s: float = 130.0,
    max_gpus: int = 64,
    first_job_id: int = 1,
) -> list[TraceRow]:
    """``jobs`` rows of a Philly-shaped trace, deterministic in all the arguments."""
    if jobs < 0 or accounts < 1 or mean_interarrival_s <= 0 or max_gpus < 1:
        raise ValueError("need jobs >= 0, accounts >= 1, mean_interarrival_s > 0 and max_gpus >= 1")
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < accounts:
        name = f"{rng.getrandbits(24):06x}"
        if name not in names:
            names.append(name)
    account_weights = [1 / (rank + 1) ** 1.5 for rank in range(accounts)]
    gangs = [g for g in GPU_WEIGHTS if g <= max_gpus] or [1]
    gang_weights = [GPU_WEIGHTS.get(g, 1.0) for g in gangs]
    mu = math.log(MEDIAN_DURATION_S)
    # the quiet gaps' mean that makes the mixture's mean gap mean_interarrival_s
    quiet_gap = max(BURST_GAP_S, (mean_interarrival_s - BURST_SHARE * BURST_GAP_S) / (1 - BURST_SHARE))

    rows: list[TraceRow] = []
    clock = 0.0
    for index in range(jobs):
        if index:
            burst = rng.random() < BURST_SHARE
            clock += rng.expovariate(1 / (BURST_GAP_S if burst else quiet_gap))
        duration = min(MAX_DURATION_S, max(1, round(rng.lognormvariate(mu, DURATION_SIGMA))))
        (gpus,) = rng.choices(gangs, gang_weights)
        (vc,) = rng.choices(names, account_weights)
        rows.append(TraceRow(first_job_id + index, round(clock), duration, gpus, vc))
    return rows


def with_walltimes(rows: list[TraceRow], *, noise: float, seed: int) -> list[TraceJob]:
    """``rows`` as the replay's jobs, each asking the walltime a user would have asked
    (``noisy_walltime``: its run time's next standard limit, with ``noise``)."""
    return [
        TraceJob(
            r.job_id,
            r.submit_s,
            r.duration_s,
            r.num_gpus,
            r.vc,
            noisy_walltime(r.duration_s, r.job_id, noise=noise, seed=seed),
        )
        for r in rows
    ]


def write_trace(path: str | Path, rows: list[TraceRow]) -> Path:
    """Write ``rows`` as a CSV with the :data:`COLUMNS` header; returns the path."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return path
