"""What is worth telling someone, read from what has already happened: job events (the
trail every state change writes in its own transaction; the idle-GPU rule's flags are
events too), the state of the queue (accounts near a quota, estimates that moved) and,
for staff, the fairness watch's episodes (an account starving) and the GPU process
audit's open findings.

Each ``Message`` carries a ``key`` naming the fact it tells (``event:42``,
``idle:7:2``): the outbox sends each key once per channel, however often a fact is read.
A message about a job also carries the job's own choice of messages (``sbatch
--mail-type``) and the states it ended in, for ``notifications.wanted`` to weigh.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count

from monitoring.fairness import open_episode
from monitoring.models import ProcessFinding
from notifications.models import EstimateSeen, Event
from people.models import Membership, Quota
from scheduler.choices import ACTIVE_STATES, TERMINAL_STATES, EventKind, JobState
from scheduler.core.hours import job_gpus
from scheduler.models import Job, JobEvent
from scheduler.reads.arrays import display_id

#: The states whose arrival is "ended" (a job cancelled by its owner is not news to them).
ENDED = {JobState.COMPLETED, JobState.FAILED, JobState.TIMEOUT, JobState.NODE_FAIL}


@dataclass(frozen=True)
class Message:
    user_id: int
    event: str
    key: str
    subject: str
    body: str
    job_id: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    #: The job's own choice (``Job.mail_events``); ``None``: its owner's settings decide.
    mail_types: tuple[str, ...] | None = None
    #: The state(s) the job, or an array's tasks, ended in (FAIL and TIME_LIMIT look at them).
    ended: frozenset[str] = frozenset()


def job_url(job_id: int) -> str:
    return f"{settings.PORTAL_URL.rstrip('/')}/jobs/{job_id}/"


def _about(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "state": job.state,
        "account": job.account.name,
        "exit_code": job.exit_code,
        "url": job_url(job.id),
    }


def from_events(events: Iterable[JobEvent]) -> Iterator[Message]:
    """The messages job events make (see ``Event``): one per event that is news to the
    job's owner. The tasks of a job array make one message for the whole array, when its
    last task ends (as Slurm mails an array once), never one per task: a 10,000-task
    sweep is one e-mail, not 10,000; only a task's idle GPUs are told task by task. An
    array whose job chose its own messages (``sbatch --mail-type``) is also told when its
    first task starts (Slurm's BEGIN for an array), and one that chose ARRAY_TASKS is
    told task by task, each task as a job of its own."""
    events = list(events)
    jobs = Job.objects.select_related("owner", "account").in_bulk({e.job_id for e in events})
    ended_arrays = _ended_arrays(job.array_job_id for job in jobs.values() if job.array_job_id is not None)
    for event in events:
        job = jobs.get(event.job_id)
        if job is None:
            continue
        kind, to = event.kind, (event.data or {}).get("to")
        if job.array_job_id is not None and kind != EventKind.IDLE and "ARRAY_TASKS" not in (job.mail_events or ()):
            if to == JobState.RUNNING and job.mail_events is not None:
                yield _array_started(job, event)
            states = ended_arrays.pop(job.array_job_id, None)
            if states is not None and set(states) != {JobState.CANCELLED}:  # all cancelled: its owner's doing
                yield _array_ended(job, states)
            continue
        name = f"job {display_id(job)} ({job.name})"
        ended: set[str] = set()
        by_owner = event.message.endswith(f"by {job.owner.get_username()}")
        if to == JobState.RUNNING:
            what, subject = Event.STARTED, f"Started: {name}"
            text = f"Your {name} started: {event.message}."
        elif to in ENDED and kind != EventKind.CANCELLED:
            code = (event.data or {}).get("exit_code", job.exit_code)
            what, subject, ended = Event.ENDED, f"{to.title()}: {name}", {to}
            text = f"Your {name} ended {to}" + (f" with exit code {code}" if code is not None else "") + "."
        elif kind in (EventKind.PREEMPTED, EventKind.REQUEUED):
            what, subject = Event.PREEMPTED, f"{kind.title()}: {name}"
            text = f"Your {name} was {kind}: {event.message}. It waits to run again."
        elif kind == EventKind.HELD and not by_owner:
            what, subject = Event.HELD, f"Held: {name}"
            text = f"Your {name} was {event.message}; it will not start until released."
        elif kind == EventKind.CANCELLED and not by_owner:
            what, subject, ended = Event.ENDED, f"Cancelled: {name}", {JobState.CANCELLED}
            text = f"Your {name} was {event.message}."
        elif kind == EventKind.IDLE:
            what, subject = Event.IDLE, f"Idle GPUs: {name}"
            text = (
                f"Your {name} holds GPUs it does not use: {event.message}. Others are waiting for GPUs: "
                "if it no longer needs them, cancel it."
            )
        else:
            continue
        yield Message(
            job.owner_id,
            what,
            f"event:{event.id}",
            subject,
            f"{text}\n{job_url(job.id)}",
            job.id,
            _about(job),
            _mail_types(job),
            frozenset(ended),
        )


def _mail_types(job: Job) -> tuple[str, ...] | None:
    return None if job.mail_events is None else tuple(job.mail_events)


def _ended_arrays(arrays: Iterable[int]) -> dict[int, dict[str, int]]:
    """Array id -> its tasks counted by state, for those of ``arrays`` whose every task
    has ended (two queries, whatever the number of arrays)."""
    candidates = set(arrays)
    if not candidates:
        return {}
    unfinished = set(
        Job.objects.filter(array_job_id__in=candidates)
        .exclude(state__in=TERMINAL_STATES)
        .values_list("array_job_id", flat=True)
        .distinct()
    )
    done = candidates - unfinished
    if not done:
        return {}
    counts: dict[int, dict[str, int]] = {array: {} for array in done}
    rows = Job.objects.filter(array_job_id__in=done).order_by().values_list("array_job_id", "state")
    for array, state, n in rows.annotate(n=Count("id")).values_list("array_job_id", "state", "n"):
        counts[array][state] = n
    return counts


def _array_started(task: Job, event: JobEvent) -> Message:
    """An array's start: its first task's (the key makes it one message, whichever task
    is read first)."""
    array = task.array_job_id
    name = f"array {array} ({task.name})"
    return Message(
        task.owner_id,
        Event.STARTED,
        f"array-started:{array}",
        f"Started: {name}",
        f"The first task of your {name} started: {event.message}. The starts of its other tasks are not told "
        f"(add ARRAY_TASKS to its --mail-type to hear of each task).\n{job_url(array or task.id)}",
        array,
        {**_about(task), "id": array, "url": job_url(array or task.id)},
        _mail_types(task),
    )


def _array_ended(task: Job, states: dict[str, int]) -> Message:
    array = task.array_job_id
    tally = ", ".join(f"{n} {state.lower()}" for state, n in sorted(states.items()))
    name = f"array {array} ({task.name})"
    return Message(
        task.owner_id,
        Event.ENDED,
        f"array-ended:{array}",
        f"Ended: {name}",
        f"Every task of your {name} has ended: {tally}.\n{job_url(array or task.id)}",
        array,
        {**_about(task), "id": array, "url": job_url(array or task.id), "tasks": states},
        _mail_types(task),
        frozenset(states),
    )


def quotas_near(now: datetime) -> Iterator[Message]:
    """Each member of an account whose active jobs use ``NOTIFY_QUOTA_PCT`` of its GPU
    quota (``max_gpus``), once a day per account."""
    threshold = settings.NOTIFY_QUOTA_PCT / 100
    quotas = {
        q.account_id: q for q in Quota.objects.filter(account__isnull=False, max_gpus__gt=0) if q.account_id is not None
    }
    if not quotas:
        return
    used: dict[int, float] = defaultdict(float)
    active = Job.objects.filter(account_id__in=list(quotas), state__in=ACTIVE_STATES)
    for account, nodes, gpus, share in active.values_list("account_id", "nodes", "gpus_per_node", "gpu_share"):
        if account is not None:
            used[account] += job_gpus(nodes, gpus, share)
    day = now.date().isoformat()
    for account_id, quota in quotas.items():
        limit = quota.max_gpus or 0
        if used[account_id] < threshold * limit:
            continue
        name = quota.account.name if quota.account else "?"
        text = (
            f"Account {name} uses {used[account_id]:g} of its {limit} GPUs ({100 * used[account_id] / limit:.0f}%); "
            "new jobs may wait for the quota."
        )
        for user_id in Membership.objects.filter(account_id=account_id).values_list("user_id", flat=True):
            yield Message(
                user_id,
                Event.QUOTA_NEAR,
                f"quota:{account_id}:{day}:{user_id}",
                f"Quota: {name} at {100 * used[account_id] / limit:.0f}%",
                text,
                None,
                {"account": name, "used_gpus": used[account_id], "max_gpus": limit},
            )


def estimates_moved(now: datetime) -> Iterator[Message]:
    """Waiting jobs whose estimated start moved by more than ``NOTIFY_ESTIMATE_SHIFT_MINUTES``
    since their owner last heard (the first estimate is only remembered)."""
    shift = timedelta(minutes=settings.NOTIFY_ESTIMATE_SHIFT_MINUTES)
    waiting = Job.objects.filter(state=JobState.PENDING, estimated_start_at__isnull=False).select_related(
        "owner", "account"
    )
    seen = dict(EstimateSeen.objects.filter(job__in=waiting).values_list("job_id", "estimate"))
    new = []
    for job in waiting:
        estimate = job.estimated_start_at
        assert estimate is not None
        before = seen.get(job.id)
        if before is None:
            new.append(EstimateSeen(job=job, estimate=estimate))
            continue
        if abs(estimate - before) <= shift:
            continue
        EstimateSeen.objects.filter(job=job).update(estimate=estimate)
        later = "later" if estimate > before else "earlier"
        yield Message(
            job.owner_id,
            Event.ESTIMATE_MOVED,
            f"estimate:{job.id}:{int(estimate.timestamp())}",
            f"Estimate moved {later}: job {job.id} ({job.name})",
            f"Your job {job.id} ({job.name}) is now expected to start by {estimate:%Y-%m-%d %H:%M} UTC "
            f"(was {before:%Y-%m-%d %H:%M}).\n{job_url(job.id)}",
            job.id,
            {**_about(job), "estimated_start": estimate.isoformat(), "was": before.isoformat()},
        )
    EstimateSeen.objects.bulk_create(new, ignore_conflicts=True)


def starving(now: datetime) -> Iterator[Message]:
    """Each active staff member, once per fairness episode (``monitoring.fairness``; its
    id is in the key): which account is starving, how unfair the last day was, and where
    the replay of another policy is. A recovery and a relapse make a new episode, so a
    new message."""
    episode = open_episode()
    if episode is None:
        return
    portal = settings.PORTAL_URL.rstrip("/")
    replay = (
        f"What switching to {settings.FAIRNESS_SWITCH_POLICY} would have changed, replayed on the last "
        f"{settings.FAIRNESS_SWITCH_DAYS} days: {portal}/manage/simulations/{episode.switch_id}/"
        if episode.switch_id
        else ""
    )
    text = (
        f"Account {episode.account}'s jobs waited {episode.worst_ratio:.1f}x longer for their run times than "
        f"the mean over the last 24 h; Jain's index over the accounts' slowdowns is {episode.jain:.2f}, "
        f"below the level of {settings.FAIRNESS_WATCH_BELOW:g}.\n{replay}\n{portal}/manage/cluster/#fairness"
    )
    staff = get_user_model().objects.filter(is_staff=True, is_active=True).values_list("pk", flat=True)
    for user_id in staff:
        yield Message(
            user_id,
            Event.STARVING,
            f"starving:{episode.pk}:{user_id}",
            f"Fairness: {episode.account} is starving",
            text,
            None,
            {
                "account": episode.account,
                "jain": episode.jain,
                "worst_ratio": episode.worst_ratio,
                "since": episode.started_at.isoformat(),
                "switch": episode.switch_id,
            },
        )


def nodes_url() -> str:
    return f"{settings.PORTAL_URL.rstrip('/')}/manage/nodes/"


def gpu_process_findings() -> Iterator[Message]:
    """Each active staff member, once per open finding of the GPU process audit
    (``monitoring.audit``): the key names the finding, so a finding seen by many audit
    passes is one message; a process that leaves and comes back is a new finding."""
    findings = list(
        ProcessFinding.objects.filter(cleared_at__isnull=True).select_related("gpu__node").order_by("first_seen_at")
    )
    if not findings:
        return
    staff = list(get_user_model().objects.filter(is_staff=True, is_active=True).values_list("pk", flat=True))
    for finding in findings:
        where = f"GPU {finding.gpu.index} of {finding.gpu.node.name}"
        process = f"pid {finding.pid}" + (f" ({finding.command})" if finding.command else "")
        text = (
            f"{finding.get_rule_display().capitalize()} on {where}: {process} of {finding.owner}, "
            f"{finding.used_memory_mib} MiB; {finding.reason}. The GPU gets no new jobs until it is gone."
        )
        payload = {
            "node": finding.gpu.node.name,
            "gpu": finding.gpu.index,
            "rule": finding.rule,
            "pid": finding.pid,
            "uid": finding.uid,
            "user": finding.user,
            "command": finding.command,
            "job": finding.job_id,
            "since": finding.first_seen_at.isoformat(),
            "url": nodes_url(),
        }
        for user_id in staff:
            yield Message(
                user_id,
                Event.GPU_PROCESS,
                f"gpu-process:{finding.pk}:{user_id}",
                f"GPU process: {finding.get_rule_display()} on {where}",
                f"{text}\n{nodes_url()}",
                None,
                payload,
            )
