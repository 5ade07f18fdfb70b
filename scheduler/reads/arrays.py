"""Job arrays as people read them: one line per array in a queue, task states as counts.

``squeue`` shows an array's waiting tasks as one line (``42_[8-999]``) and each task
that started on its own line; :func:`collapse_pending` does that to a page of jobs, and
:func:`array_summary` counts one array's tasks by state for its page and the API. Both
read in a fixed number of queries, however many tasks an array has.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Min, Q, QuerySet

from scheduler.choices import JobState
from scheduler.jobs.array_spec import task_label
from scheduler.models import Job


def display_label(job_id: int, array_job: int | None, task: int | None) -> str:
    """``42`` for a job, ``42_7`` for task 7 of array 42 (``squeue``'s JOBID)."""
    return str(job_id) if array_job is None else f"{array_job}_{task}"


def display_id(job: Job) -> str:
    return display_label(job.id, job.array_job_id, job.array_task_id)


@dataclass(frozen=True, slots=True)
class ArraySummary:
    """One array: its spec and throttle as they stand, and its tasks by state."""

    array_job: int
    name: str
    owner: str
    account: str
    spec: str
    task_count: int
    throttle: int
    states: dict[str, int]
    #: The waiting tasks, ``42_[8-999]`` ("" when none waits).
    pending: str


def array_summary(tasks: QuerySet[Job], array_job: int) -> ArraySummary | None:
    """``tasks`` (the array's tasks the reader may see) summed up; ``None`` if there are none."""
    first = tasks.select_related("owner", "account").order_by("id").first()
    if first is None:
        return None
    states = dict(tasks.order_by().values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    waiting = tasks.filter(state=JobState.PENDING).values_list("array_task_id", flat=True)
    indices = [i for i in waiting if i is not None]
    return ArraySummary(
        array_job=array_job,
        name=first.name,
        owner=first.owner.get_username(),
        account=first.account.name,
        spec=first.array_spec,
        task_count=first.array_task_count,
        throttle=first.array_throttle,
        states={state: states.get(state, 0) for state in JobState.values if states.get(state)},
        pending=task_label(array_job, indices) if indices else "",
    )


def without_folded_tasks(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """``jobs`` where each array's waiting tasks are one row: the first of them (the
    others are dropped here and named by :func:`collapse_pending`)."""
    waiting_task = Q(state=JobState.PENDING, array_job__isnull=False)
    firsts = (
        jobs.filter(waiting_task)
        .order_by()
        .values("array_job")
        .annotate(first=Min("id"))
        .values_list("first", flat=True)
    )
    return jobs.exclude(waiting_task & ~Q(id__in=firsts))


def collapse_pending(page: Iterable[tuple[int, int | None, str]]) -> dict[int, dict[str, Any]]:
    """For the first waiting task of each array on ``page`` (``(id, array_job, state)``
    of each row :func:`without_folded_tasks` kept): job id -> ``{"label": "42_[8-999]",
    "tasks": 992}``, the waiting tasks it stands for. One query for the page."""
    heads = {array: job_id for job_id, array, state in page if array is not None and state == JobState.PENDING}
    if not heads:
        return {}
    indices: dict[int, list[int]] = {array: [] for array in heads}
    rows = Job.objects.filter(array_job_id__in=heads, state=JobState.PENDING)
    for array, index in rows.values_list("array_job_id", "array_task_id"):
        if index is not None:
            indices[array].append(index)
    return {
        heads[array]: {"label": task_label(array, found), "tasks": len(found), "array_job": array}
        for array, found in indices.items()
        if found
    }
