"""A week of finished jobs for the embedded demo, so that its GPU-hours page, the
utilization-weighted chargeback and an account preview have a history to show.

Seeded (the same history every time), written through the real submit and state
transitions (which record each attempt for accounting), each at the time it happened
(the job's events and rows say when it was submitted, started and ended, not when the
demo was seeded), with the efficiency figures the monitoring pass would have written:
most jobs measured, some not (no agent then).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from monitoring.models import JobEfficiency
from people.models import Account, Qos
from scheduler.choices import EventKind, JobState
from scheduler.jobs.submit import submit_job
from scheduler.jobs.transitions import claim_many, transition
from scheduler.models import Gpu

#: Who runs what: (owner, account, weight).
PEOPLE = (("alice", "nlp", 3), ("bob", "nlp", 2), ("alice", "vision", 3))
DAYS = 7
JOBS = 240


def seed_history(accounts: Mapping[str, Account], users: Mapping[str, Any], qos: Qos, now: datetime) -> int:
    """Write :data:`JOBS` finished jobs over the :data:`DAYS` before ``now``; returns how many."""
    rng = random.Random(2026)
    nodes = _nodes_by_model()
    memory = dict(
        Gpu.objects.filter(node__cluster__name="demo", parent__isnull=True).values_list("model", "memory_mib")
    )
    people = [(owner, account) for owner, account, weight in PEOPLE for _ in range(weight)]
    for i in range(JOBS):
        owner, account = rng.choice(people)
        model = rng.choice(sorted(nodes))
        gpus = rng.choice((1, 2, 4, 8, 8))
        run = timedelta(minutes=rng.randrange(30, 360))
        # Bursts: each day's jobs arrive around 9:00 and 14:00, more than the GPUs at once.
        day = now - timedelta(days=DAYS) + timedelta(days=i * DAYS // JOBS)
        submitted = day.replace(hour=rng.choice((9, 14)), minute=rng.randrange(0, 30))
        started = submitted + timedelta(minutes=rng.randrange(0, 120))
        job = submit_job(
            owner=users[owner],
            account=accounts[account],
            qos=qos,
            name=f"history-{i:03d}",
            command="true",
            gpus_per_node=gpus,
            gpu_model=model,
            walltime_seconds=int(run.total_seconds() * 1.5) // 3600 * 3600 + 3600,
            now=submitted,
        )
        node = rng.choice(nodes[model])
        placed = [{"node": node, "gpu_indices": list(range(gpus)), "cpus": gpus * 4, "memory_mib": 0}]
        claim_many([job.pk], {"allocations": [placed]}, [(job.pk, f"scheduled on {node}", {})], now=started)
        transition(
            job.id, [JobState.DISPATCHING], JobState.RUNNING, event=EventKind.DISPATCHED, started_at=started, at=started
        )
        ended = started + run
        transition(job.id, [JobState.RUNNING], JobState.COMPLETED, ended_at=ended, exit_code=0, at=ended)
        measured = rng.random() < 0.8
        JobEfficiency.objects.create(
            job=job,
            attempt=0,
            gpu_hours=gpus * run.total_seconds() / 3600,
            elapsed_seconds=int(run.total_seconds()),
            samples=int(run.total_seconds() // 10) if measured else 0,
            gpu_util_mean=rng.uniform(15, 95) if measured else None,
            computed_at=started + run,
            **(_memory_and_peaks(random.Random(i), memory[model]) if measured else {}),
        )
    return JOBS


def _memory_and_peaks(rng: random.Random, memory_mib: int) -> dict[str, float]:
    """The rest of what the monitoring pass writes for a measured job (its peak
    utilization, its memory used of its GPUs' ``memory_mib``), so the job page and ``qm
    show`` read a demo job as they read a real one. Its own ``rng``: the history's times
    stay what they were."""
    mean = rng.uniform(0.2, 0.8) * memory_mib
    return {
        "gpu_util_peak": rng.uniform(95, 100),
        "memory_used_mean_mib": mean,
        "memory_used_peak_mib": min(memory_mib, mean * rng.uniform(1.0, 1.3)),
        "memory_total_mib": memory_mib,
    }


def _nodes_by_model() -> dict[str, list[str]]:
    """The demo's 8-GPU nodes of whole GPUs by model (not split into MIG slices): any
    request of the history fits one. One query."""
    demo = Gpu.objects.filter(node__cluster__name="demo")
    split = set(demo.filter(parent__isnull=False).values_list("node__name", flat=True))
    counts = Counter(demo.filter(parent__isnull=True).values_list("node__name", "model"))
    by_model: dict[str, list[str]] = {}
    for (node, model), gpus in sorted(counts.items()):
        if gpus >= 8 and node not in split:
            by_model.setdefault(model, []).append(node)
    return by_model
