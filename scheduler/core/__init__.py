"""The pure scheduling core: plain data in, decisions out. No Django, no I/O."""

from scheduler.core.cycle import schedule
from scheduler.core.types import (
    Allocation,
    Decisions,
    GpuView,
    NodeView,
    PendingJob,
    PendingReason,
    Policy,
    RunningJob,
    Snapshot,
    Start,
)

__all__ = [
    "Allocation",
    "Decisions",
    "GpuView",
    "NodeView",
    "PendingJob",
    "PendingReason",
    "Policy",
    "RunningJob",
    "Snapshot",
    "Start",
    "schedule",
]
