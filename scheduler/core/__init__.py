"""The pure scheduling core: plain data in, decisions out. No Django, no I/O.

Runs compiled when a matching build exists (see ``scheduler.core.compiled``); that
choice is made here, before any other module of the package is imported.
"""

from scheduler.core.compiled import activate

activate(__path__)

from scheduler.core.cycle import schedule  # noqa: E402
from scheduler.core.types import (  # noqa: E402
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
