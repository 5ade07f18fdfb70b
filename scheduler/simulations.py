"""Runs of the trace simulator staff ask for (:class:`~scheduler.models.Simulation`):
recorded, run after commit as the Celery task ``scheduler.run_simulation`` (inline
without a broker) under a soft time limit, telling their row how far they got, and
ending with the figures or why there are none.

Three kinds: a **preview** of an account change on the site's own history
(``scheduler.previews``), a **replay** of a trace (an uploaded Philly-format CSV,
or the site's history) under chosen policies on a cluster (the site's own, or N nodes
of G GPUs), with each policy's figures (``scheduler.replay.metrics``), and a **switch**
of the site's policy to another on its history, account by account
(``scheduler.policy_switch``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from people.models import Account
from scheduler.core.types import NodeView
from scheduler.jobs.remote import after_commit
from scheduler.models import Simulation
from scheduler.policy_switch import policy_switch
from scheduler.previews import TooLittleHistory, preview, site_history
from scheduler.replay.metrics import bounds, measure
from scheduler.replay.simulator import GUARANTEED, POLICIES, guarantees_for, policy_named, replay
from scheduler.replay.trace import SimulationError, TraceJob, homogeneous_cluster, parse_philly_csv
from scheduler.tick.snapshot import load_hardware

log = logging.getLogger(__name__)

#: The most jobs an uploaded trace may hold (a month of a busy site's Philly window is
#: about 20,000), and the most characters of it.
MAX_TRACE_JOBS = 50_000
MAX_TRACE_CHARS = 5_000_000


def start_preview(
    actor: Any, account: Account, *, days: int, shares: int | None, limits: dict[str, Any] | None
) -> Simulation:
    """Record a preview of ``account`` with ``shares`` and ``limits`` (``Limits`` fields;
    ``None``: unchanged) and run it after commit."""
    return _start(
        actor, Simulation.Kind.PREVIEW, account=account, days=days, params={"shares": shares, "limits": limits}
    )


def start_replay(
    actor: Any,
    *,
    policies: Sequence[str],
    nodes: int | None,
    gpus_per_node: int | None,
    trace: str = "",
    trace_name: str = "",
    days: int = 0,
) -> Simulation:
    """Record a replay of ``trace`` (a Philly-format CSV), or of the site's last ``days``
    when it is empty, under ``policies`` on ``nodes`` x ``gpus_per_node`` GPUs (``None``:
    the site's own nodes), and run it after commit."""
    params = {"policies": list(policies), "nodes": nodes, "gpus_per_node": gpus_per_node}
    return _start(actor, Simulation.Kind.REPLAY, days=days, params=params, trace=trace, trace_name=trace_name)


def start_switch(actor: Any, *, policy: str, days: int) -> Simulation:
    """Record a comparison of the site's policy with ``policy`` on the site's last
    ``days`` (``scheduler.policy_switch``) and run it after commit. ``actor`` may be
    ``None`` (the fairness watch asks for one itself)."""
    return _start(actor, Simulation.Kind.SWITCH, days=days, params={"policy": policy})


def trace_problem(text: str) -> str | None:
    """What is wrong with an uploaded trace, naming the line, or ``None``."""
    if len(text) > MAX_TRACE_CHARS:
        return f"At most {MAX_TRACE_CHARS:,} characters."
    try:
        jobs = parse_philly_csv(text.splitlines(), source="the trace")
    except SimulationError as exc:
        return str(exc)
    if not jobs:
        return "The trace has no jobs."
    if len(jobs) > MAX_TRACE_JOBS:
        return f"At most {MAX_TRACE_JOBS:,} jobs; this one has {len(jobs):,}."
    return None


def _start(actor: Any, kind: str, **fields: Any) -> Simulation:
    row = Simulation.objects.create(kind=kind, requested_by=actor if getattr(actor, "pk", None) else None, **fields)
    after_commit("scheduler.run_simulation", run_simulation, row.pk)
    return row


def run_simulation(simulation_id: int) -> None:
    """Run a recorded simulation, telling its row how far it got, and store the figures
    or why there are none (too little history, a bad trace, the time limit, an error)."""
    row = Simulation.objects.select_related("account").filter(pk=simulation_id).first()
    if row is None or row.state in (Simulation.State.DONE, Simulation.State.FAILED):
        return  # gone, or a redelivered task of one that finished
    Simulation.objects.filter(pk=row.pk).update(state=Simulation.State.RUNNING, progress=0.0)
    progress = partial(_tell_progress, row.pk)
    try:
        result = _RUNS[row.kind](row, progress)
    except (TooLittleHistory, SimulationError) as exc:
        _finish(row.pk, Simulation.State.FAILED, error=str(exc)[:500])
    except SoftTimeLimitExceeded:
        limit = settings.PREVIEW_TIME_LIMIT_SECONDS
        _finish(row.pk, Simulation.State.FAILED, error=f"The replays took longer than {limit} s; try a shorter window.")
    except Exception as exc:  # a run must end in a state the page can show
        log.exception("simulation %s failed", row.pk)
        _finish(row.pk, Simulation.State.FAILED, error=f"The run failed: {exc}"[:500])
    else:
        _finish(row.pk, Simulation.State.DONE, result=result, progress=1.0)


def _run_preview(row: Simulation, progress: Callable[[float], None]) -> dict[str, Any]:
    if row.account is None:
        raise SimulationError("The account of this preview was deleted.")
    params = row.params or {}
    figures = preview(
        row.account.name,
        shares=params.get("shares"),
        limits=params.get("limits"),
        days=row.days,
        now=timezone.now(),
        progress=progress,
    )
    return asdict(figures)


def _run_replay(row: Simulation, progress: Callable[[float], None]) -> dict[str, Any]:
    params = row.params or {}
    trace = (
        parse_philly_csv(row.trace.splitlines(), source=row.trace_name or "the trace")
        if row.trace
        else site_history(timezone.now(), row.days)
    )
    if not trace:
        raise SimulationError("No jobs to replay.")
    cluster: tuple[NodeView, ...] = (
        homogeneous_cluster(params["nodes"], params["gpus_per_node"]) if params.get("nodes") else load_hardware()
    )
    return replay_policies(trace, cluster, params.get("policies") or sorted(POLICIES), progress)


def _run_switch(row: Simulation, progress: Callable[[float], None]) -> dict[str, Any]:
    policy = (row.params or {}).get("policy", "")
    return asdict(policy_switch(policy, days=row.days, now=timezone.now(), progress=progress))


#: How each kind of simulation runs.
_RUNS: dict[str, Callable[[Simulation, Callable[[float], None]], dict[str, Any]]] = {
    Simulation.Kind.PREVIEW: _run_preview,
    Simulation.Kind.REPLAY: _run_replay,
    Simulation.Kind.SWITCH: _run_switch,
}


def replay_policies(
    trace: Sequence[TraceJob],
    cluster: Sequence[NodeView],
    policies: Sequence[str],
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Each policy's figures on ``trace`` and ``cluster`` (as ``python -m scheduler.replay``
    prints them), with the trace's bounds; ``progress`` told after each policy."""
    capacity = sum(len(node.gpus) for node in cluster if node.schedulable)
    rows: list[Mapping[str, Any]] = []
    for i, name in enumerate(policies):
        guarantees = guarantees_for(trace, capacity) if name in GUARANTEED else None
        rows.append({"policy": name, **asdict(measure(replay(trace, cluster, policy_named(name), guarantees)))})
        if progress is not None:
            progress((i + 1) / len(policies))
    return {"jobs": len(trace), "capacity_gpus": capacity, "bounds": asdict(bounds(trace, capacity)), "policies": rows}


def _tell_progress(pk: int, done: float) -> None:
    Simulation.objects.filter(pk=pk).update(progress=done)


def _finish(pk: int, state: str, **fields: Any) -> None:
    Simulation.objects.filter(pk=pk).update(state=state, finished_at=timezone.now(), **fields)
