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

from monitoring.models import GpuHealth


def unhealthy_gpu_ids(now: datetime | None = None) -> set[int]:
    """GPUs that get no new jobs now: a condition, or an XID within the hold period. One query."""
    now = now or timezone.now()
    hold = timedelta(seconds=settings.MONITORING_XID_HOLD_SECONDS)
    return set(GpuHealth.objects.filter(~Q(condition="") | Q(xid_at__gt=now - hold)).values_list("gpu_id", flat=True))
