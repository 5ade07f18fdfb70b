"""Builders for test objects: core dataclasses and database rows.

Tests say what matters to them ("an 8-GPU H100 node") and let the builder fill in the
rest, so a scenario reads as a specification rather than a wall of dicts.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.core.types import Allocation, GpuView, NodeView, PendingJob, RunningJob, Snapshot, cpu_millis

T0 = datetime(2026, 1, 1, tzinfo=UTC)

MODELS = {
    "H100-80GB": (81920, (9, 0)),
    "A100-40GB": (40960, (8, 0)),
    "L4": (24576, (8, 9)),
    "V100-16GB": (16384, (7, 0)),
}

_ids = itertools.count(1)


# --- Core ---------------------------------------------------------------------------


def node(
    name: str,
    *,
    gpus: int = 8,
    model: str = "H100-80GB",
    cluster: str = "c1",
    cpus: float = 64,
    memory_mib: int = 512_000,
    schedulable: bool = True,
    unhealthy: tuple[int, ...] = (),
    fractional_cpus: bool = True,
) -> NodeView:
    memory, cc = MODELS[model]
    return NodeView(
        name=name,
        cluster=cluster,
        cpu_millis=cpu_millis(cpus),
        fractional_cpus=fractional_cpus,
        memory_mib=memory_mib,
        gpus=tuple(GpuView(i, model, memory, cc, healthy=i not in unhealthy) for i in range(gpus)),
        schedulable=schedulable,
    )


def pending(
    job_id: int | None = None, *, age_rank: int | None = None, cpus_per_node: float = 1, **request: Any
) -> PendingJob:
    """A pending job; ``age_rank`` orders submission (lower = older), default = id;
    ``cpus_per_node`` in CPUs, as users ask (the core counts millicores)."""
    job_id = job_id if job_id is not None else next(_ids)
    rank = age_rank if age_rank is not None else job_id
    return PendingJob(
        id=job_id,
        submitted_at=T0 + timedelta(seconds=rank),
        cpu_millis_per_node=cpu_millis(cpus_per_node),
        **request,
    )


def running(job_id: int, *allocations: tuple[str, tuple[int, ...]]) -> RunningJob:
    return RunningJob(job_id, tuple(Allocation(n, idx) for n, idx in allocations))


def snapshot(
    nodes: list[NodeView], pending_jobs: list[PendingJob], running_jobs: tuple[RunningJob, ...] | list[RunningJob] = ()
) -> Snapshot:
    return Snapshot(nodes=tuple(nodes), running=tuple(running_jobs), pending=tuple(pending_jobs))


def node_job(job_id: int, gpus: tuple[int, ...], *, uid: int | None = 1001, ended_at: datetime | None = None) -> Any:
    """A job's part on one node for the GPU process audit, running as ``uid`` (``None``:
    its owner has no cluster identity), holding (or, ended, having held) ``gpus``."""
    from monitoring.process_audit import Identity, NodeJob

    identity = Identity(uid, f"u{uid}") if uid is not None else None
    return NodeJob(job_id, identity, frozenset(gpus), ended_at)


def gpu_process(pid: int, *, uid: int | None = None, user: str = "", command: str = "python", mib: int = 1024) -> Any:
    """A process on a GPU as a sample lists it (``processes`` items), owner as given."""
    item: dict[str, Any] = {"pid": pid, "used_memory_mib": mib, "command": command}
    if uid is not None:
        item["uid"] = uid
    if user:
        item["user"] = user
    return item


# --- Database -------------------------------------------------------------------------


def local_node_group(
    name: str, *, count: int = 1, gpus: int = 8, model: str = "H100-80GB", cpus: int = 64, memory_mib: int = 512_000
) -> dict[str, Any]:
    """One entry of a local backend's ``nodes`` config."""
    memory, cc = MODELS[model]
    return {
        "name": name,
        "count": count,
        "cpus": cpus,
        "memory_mib": memory_mib,
        "gpus": {"count": gpus, "model": model, "memory_mib": memory, "compute_capability": f"{cc[0]}.{cc[1]}"},
    }


def make_local_cluster(name: str = "test", groups: list[dict[str, Any]] | None = None, **config: Any) -> Any:
    """A local-backend cluster whose nodes are synced into the database (the real path)."""
    from scheduler.clusters.sync import sync_nodes
    from scheduler.jobs.remote import backend_for
    from scheduler.models import Cluster

    groups = groups or [local_node_group("h100-{:02d}", count=2), local_node_group("l4-01", gpus=4, model="L4")]
    cluster = Cluster.objects.create(name=name, kind="local", config={"nodes": groups, **config})
    sync_nodes(cluster, backend_for(cluster), datetime.now(UTC))
    return cluster


def make_user(username: str, *, staff: bool = False) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username, f"{username}@example.org", "pw-" + username, is_staff=staff)


def report_processes(node: str, index: int, processes: list[dict[str, Any]], at: datetime) -> None:
    """The node agent of ``node`` reports GPU ``index`` at ``at`` running ``processes``
    (``gpu_process`` items), through the ingest service."""
    from monitoring.services import ingest_batch
    from scheduler.models import Node

    reading = {"index": index, "at": at.isoformat(), "memory_used_mib": 1024, "processes": processes}
    assert ingest_batch(Node.objects.get(name=node), [reading], now=at).accepted == 1


def give_identity(user: Any, uid: int) -> Any:
    """``user``'s jobs run as the POSIX user of their name with ``uid`` on the clusters."""
    from people.models import ClusterIdentity

    return ClusterIdentity.objects.create(user=user, username=user.get_username(), uid=uid)


def make_account(name: str, *, parent: Any = None, shares: int = 1) -> Any:
    from people.models import Account

    return Account.objects.create(name=name, parent=parent, shares=shares)


def join(user: Any, account: Any, role: str = "member") -> Any:
    from people.models import Membership

    return Membership.objects.create(user=user, account=account, role=role)


def job_request(**changes: Any) -> dict[str, Any]:
    """A job request as the API's serializer shapes it (every field present, at its
    default unless changed): one GPU for ten minutes running ``python train.py``, no
    account or QOS (those are admission's arguments). ``array`` may be given as text
    (``"0-99"``)."""
    from decimal import Decimal

    from scheduler.jobs.array_spec import parse_array

    request: dict[str, Any] = {
        "name": "train",
        "command": "python train.py",
        "script": "",
        "image": "",
        "env": {},
        "workdir": "",
        "files": {},
        "array": None,
        "nodes": 1,
        "gpus_per_node": 1,
        "cpus_per_node": Decimal(1),
        "memory_mib_per_node": 0,
        "gpu_model": "",
        "min_gpu_memory_mib": 0,
        "min_compute_capability": "",
        "walltime_seconds": 600,
        "nice": 0,
        "dependencies": [],
        "gpu_share": 0.0,
        "gpu_memory_mib_share": 0,
        "node_labels": {},
        "reservation": "",
    }
    request.update(changes)
    if isinstance(request["array"], str):
        request["array"] = parse_array(request["array"], max_size=1_000_000)
    return request


def submit(owner: Any, account: Any, *, qos: Any = None, **overrides: Any) -> Any:
    """Submit through the service, with a 1-GPU, 1-hour ``true`` job by default."""
    from scheduler.jobs.submit import submit_job

    fields: dict[str, Any] = {"name": "job", "command": "true", "gpus_per_node": 1, "walltime_seconds": 3600}
    fields.update(overrides)
    return submit_job(owner=owner, account=account, qos=qos, **fields)


def start(job: Any, at: datetime, *, waited: timedelta = timedelta(0)) -> Any:
    """The job RUNNING since ``at`` as dispatch leaves it (with a backend id), having
    been submitted ``waited`` before; its row is written directly (no backend runs)."""
    from scheduler.models import Job

    job.refresh_from_db(fields=["attempt"])
    Job.objects.filter(pk=job.pk).update(
        state="RUNNING", started_at=at, submitted_at=at - waited, external_id=f"ext-{job.pk}.{job.attempt}"
    )
    job.refresh_from_db()
    return job


def end(job: Any, at: datetime, state: str = "COMPLETED") -> bool:
    """The backend's news that the job's running attempt ended at ``at``, applied by the
    conditional transition a poll uses; returns whether it moved the job."""
    from scheduler.jobs.transitions import transition

    return transition(job.pk, ["RUNNING"], state, ended_at=at, exit_code=0, where={"external_id": job.external_id})


def finished(owner: Any, account: Any, ended: datetime, *, waited: timedelta, ran: timedelta, **overrides: Any) -> Any:
    """A job of ``owner``'s in ``account`` that was submitted, waited ``waited``, ran
    ``ran`` and COMPLETED at ``ended``; its row is written directly (history for the
    figures that read ended jobs)."""
    from scheduler.models import Job

    job = submit(owner, account, **overrides)
    started = ended - ran
    Job.objects.filter(pk=job.pk).update(
        state="COMPLETED", submitted_at=started - waited, started_at=started, ended_at=ended
    )
    job.refresh_from_db()
    return job


def queue_line(places: dict[int, tuple[int, float]]) -> None:
    """The line as a tick leaves it: job id -> (jobs ahead, GPU-hours ahead), stored as
    ``run_tick`` stores it (``scheduler.tick.positions``), each job in it waiting its turn
    (``Priority``) as that tick said."""
    from scheduler.models import Job, TickState
    from scheduler.tick.positions import packed

    TickState.objects.update_or_create(pk=1, defaults={"queue_positions": packed(places)})
    Job.objects.filter(pk__in=places, pending_reason="").update(pending_reason="Priority")


def run_attempt(job: Any, start: datetime, end: datetime | None, node: str = "h100-01", gpus: int = 1) -> None:
    """One attempt of ``job`` on ``node`` from ``start`` to ``end`` (None: still running),
    through the real transitions, which write its hours and its ``JobAttempt`` record."""
    from scheduler.choices import EventKind, JobState
    from scheduler.jobs.transitions import transition
    from scheduler.models import Job

    Job.objects.filter(pk=job.pk).update(
        state=JobState.DISPATCHING,
        allocations=[{"node": node, "gpu_indices": list(range(gpus)), "cpus": 1, "memory_mib": 0}],
    )
    transition(job.id, [JobState.DISPATCHING], JobState.RUNNING, event=EventKind.DISPATCHED, started_at=start)
    if end is not None:
        transition(job.id, [JobState.RUNNING], JobState.COMPLETED, ended_at=end, exit_code=0)


def queue_behind_a_running_job(world: Any, now: datetime) -> dict[str, Any]:
    """At ``now``: h100-01 busy until +2 h (alice's 8 GPUs, walltime 3 h, started an hour
    ago), h100-02 until +9 h (charlie's); alice's 8-GPU job ``finetune`` of 2 h waits,
    planned on h100-01 at +2 h. What a window over h100-01 costs is easy to tell."""
    first = submit(world.alice, world.lab, gpus_per_node=8, walltime_seconds=3 * 3600)
    run_attempt(first, now - timedelta(hours=1), None, node="h100-01", gpus=8)
    second = submit(world.charlie, world.other, gpus_per_node=8, walltime_seconds=10 * 3600)
    run_attempt(second, now - timedelta(hours=1), None, node="h100-02", gpus=8)
    waiting = submit(world.alice, world.lab, name="finetune", gpus_per_node=8, walltime_seconds=2 * 3600)
    return {"running": first, "waiting": waiting}


def ended_job(
    owner: Any,
    account: Any,
    *,
    submitted: datetime,
    waited: timedelta = timedelta(0),
    ran: timedelta = timedelta(hours=1),
    gpus_busy: int | None = None,
    state: str = "COMPLETED",
    cluster: Any = None,
    **request: Any,
) -> Any:
    """A job of the past: submitted at ``submitted``, started ``waited`` later, ended after
    ``ran`` in ``state`` (on ``cluster``), its efficiency measured with ``gpus_busy`` GPUs
    busy (``None``: its GPUs reported nothing). Rows are written directly."""
    from monitoring.models import JobEfficiency
    from scheduler.models import Job

    job = submit(owner, account, **request)
    started = submitted + waited
    Job.objects.filter(pk=job.pk).update(
        state=state, submitted_at=submitted, started_at=started, ended_at=started + ran, cluster=cluster
    )
    job.refresh_from_db()
    JobEfficiency.objects.create(
        job=job,
        attempt=job.attempt,
        gpu_hours=job.nodes * job.gpus_per_node * ran.total_seconds() / 3600,
        elapsed_seconds=int(ran.total_seconds()),
        samples=0 if gpus_busy is None else 360,
        gpus_busy=gpus_busy,
        computed_at=job.ended_at,
    )
    return job


#: The states a job ends in.
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED"})


def run_until_ended(job: Any, tick: Any = None, *, timeout: float = 60) -> Any:
    """Tick and poll, as the scheduler loop does, until ``job`` (on a local cluster, whose
    jobs really run) has ended; returns it fresh. ``tick``: the ``tick`` fixture in a test
    whose transaction never commits (it runs the after-commit dispatches), else a plain
    ``run_tick``."""
    from scheduler.clusters.poll import poll_backends
    from scheduler.tick.run import run_tick
    from tests.scheduler.tick.waiting import wait_for

    def ended() -> bool:
        (tick or run_tick)()
        poll_backends()
        job.refresh_from_db()
        return job.state in ENDED

    wait_for(ended, timeout=timeout, interval=0.2, what=f"job {job.pk} to end")
    return job


def builtin_apps() -> None:
    """The built-in interactive apps, as migration scheduler 0038 writes them: a test on
    ``transactional_db`` empties every table after it, data migrations' rows included."""
    import importlib

    from django.apps import apps

    importlib.import_module("scheduler.migrations.0038_builtin_apps").add_apps(apps, None)


def launch(owner: Any, slug: str = "web-server", values: dict[str, str] | None = None, **resources: Any) -> Any:
    """Launch the built-in app ``slug`` for ``owner`` through the service (the API's and
    the page's path), with its default resources unless given (``gpus``, ``cpus``,
    ``memory_mib``, ``walltime_seconds``); a web server of one's own runs
    ``python3 -m http.server`` by default. Returns the session."""
    import dataclasses

    from scheduler.models import InteractiveApp
    from scheduler.reads.inventory import load_inventory
    from scheduler.sessions.launch import default_resources, launch_session

    app = InteractiveApp.objects.get(slug=slug)
    if values is None:
        values = (
            {"command": "exec python3 -m http.server $QM_SESSION_PORT --bind 127.0.0.1"} if slug == "web-server" else {}
        )
    chosen = dataclasses.replace(default_resources(app), **resources)
    return launch_session(app, owner, values, chosen, account=None, qos=None, hardware=load_inventory())


# --- Interactive sessions -----------------------------------------------------------------


def make_interactive_app(slug: str = "jupyterlab", *, secret_via: str = "header") -> Any:
    """An enabled app offered on every cluster; its command is never run by the proxy's tests."""
    from scheduler.models import InteractiveApp

    # The built-in apps are rows too (migration scheduler 0038): the test's own fields win.
    app, _ = InteractiveApp.objects.update_or_create(
        slug=slug,
        defaults={
            "name": slug.title(),
            "command": "serve --port {port} --base-url {base_url}",
            "secret_via": secret_via,
        },
    )
    return app


def interactive_session(
    owner: Any, account: Any, app: Any, *, host: str = "127.0.0.1", port: int | None = 20000, state: str = "RUNNING"
) -> Any:
    """A session of ``owner``'s job (1 GPU, submitted through the service) in ``state``,
    its server ready at ``host:port`` (``port=None``: not ready yet). Rows written directly."""
    import secrets

    from django.utils import timezone

    from scheduler.models import InteractiveSession, Job

    job = submit(owner, account, name=f"{app.slug} session")
    Job.objects.filter(pk=job.pk).update(state=state)
    ready = port is not None
    return InteractiveSession.objects.create(
        job=job,
        app=app,
        secret=secrets.token_urlsafe(32),
        host=host if ready else "",
        port=port,
        ready_at=timezone.now() if ready else None,
    )
