"""Which GPUs get no new jobs because of their monitored health: the one thing the
scheduler reads from monitoring.

A leaf module (Django and ``monitoring.models`` only), so the tick can import it while
monitoring, which sits above the scheduler, imports the scheduler freely.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from monitoring.models import GpuHealth, ProcessFinding


def unhealthy_gpu_ids(now: datetime | None = None) -> set[int]:
    """GPUs that get no new jobs now: a condition, an XID within the hold period, or an
    open finding of the GPU process audit (a process no job accounts for, see
    ``monitoring.audit``). One query."""
    now = now or timezone.now()
    hold = timedelta(seconds=settings.MONITORING_XID_HOLD_SECONDS)
    health = GpuHealth.objects.filter(~Q(condition="") | Q(xid_at__gt=now - hold)).order_by().values_list("gpu_id")
    audit = ProcessFinding.objects.filter(cleared_at__isnull=True).order_by().values_list("gpu_id")
    return {gpu_id for (gpu_id,) in health.union(audit)}
