"""States and kinds of the scheduler side, and the legal job state transitions."""

from __future__ import annotations

from django.db import models


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local simulated cluster"
    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"


class NodeState(models.TextChoices):
    UP = "up", "Up"
    DRAIN = "drain", "Drain"
    DOWN = "down", "Down"


class JobState(models.TextChoices):
    PENDING = "PENDING", "Pending"
    HELD = "HELD", "Held"
    DISPATCHING = "DISPATCHING", "Dispatching"
    RUNNING = "RUNNING", "Running"
    COMPLETED = "COMPLETED", "Completed"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"
    TIMEOUT = "TIMEOUT", "Timeout"
    PREEMPTED = "PREEMPTED", "Preempted"
    NODE_FAIL = "NODE_FAIL", "Node failure"


#: Jobs waiting for the scheduler (count against the pending-jobs quota).
QUEUED_STATES = frozenset({JobState.PENDING, JobState.HELD})
#: Jobs holding GPUs.
ACTIVE_STATES = frozenset({JobState.DISPATCHING, JobState.RUNNING})
TERMINAL_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.PREEMPTED,
        JobState.NODE_FAIL,
    }
)


class EventKind(models.TextChoices):
    SUBMITTED = "submitted", "Submitted"
    STARTED = "scheduled", "Scheduled"
    DISPATCHED = "dispatched", "Dispatched"
    DISPATCH_RETRY = "dispatch_retry", "Dispatch retry"
    STATE = "state", "State change"
    CANCELLED = "cancelled", "Cancelled"
    HELD = "held", "Held"
    RELEASED = "released", "Released"
    REQUEUED = "requeued", "Requeued"
    PREEMPTED = "preempted", "Preempted"
    EDITED = "edited", "Edited"
    IDLE = "idle", "Idle GPUs"
