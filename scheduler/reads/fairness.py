"""The fairness watch's figures: how evenly accounts' jobs were treated over the last
day (``scheduler.core.fairness``: each job's bounded slowdown, each account's mean,
Jain's index over the accounts, the worst account against everyone).

The jobs measured are those that ran and ended in ``(now - 24 h, now]``, GPU jobs only
(as the site's history the replays read, ``scheduler.previews.site_history``); a job's
wait is from its submission to its (last) start, its run from that start to its end.
One query, whatever the number of accounts.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.core.fairness import Fairness, account_fairness, bounded_slowdown
from scheduler.models import Job

#: The span the watch looks back over.
WINDOW = timedelta(hours=24)


def read_fairness(now: datetime, window: timedelta = WINDOW) -> Fairness:
    """The :class:`Fairness` of the GPU jobs that ended in ``(now - window, now]``."""
    rows = (
        Job.objects.filter(
            ended_at__gt=now - window,
            ended_at__lte=now,
            started_at__isnull=False,
            gpus_per_node__gt=0,
        )
        .order_by()
        .values_list("account__name", "submitted_at", "started_at", "ended_at")
    )
    return account_fairness(
        (account, bounded_slowdown((ended - submitted).total_seconds(), (ended - started).total_seconds()))
        for account, submitted, started, ended in rows
        if started is not None and ended is not None  # excluded by the query; keeps the types honest
    )
