"""The backtest of calibrated start times, on the site's own history: the jobs that ran in
the last days replayed through the trace simulator (``scheduler.replay.backtest``) on the
cluster as it is now, under the site's own policy, with every waiting job's p50 and p90
starts predicted as the estimate pass would, and then judged against when it started.

Modelling as for previews (``scheduler.previews``): a job asks for whole GPUs of any
model, the replay's users are the accounts, fair-share usage starts from nothing. The
figures say how far the p50 and p90 can be trusted on this site's kind of queue.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime

from scheduler.config import current_policy
from scheduler.models import StartBacktest
from scheduler.previews import site_history
from scheduler.replay.backtest import backtest
from scheduler.tick.snapshot import load_accounts, load_hardware, load_limits


def run_backtest(now: datetime, days: int) -> StartBacktest:
    """Replay the ``days`` before ``now`` and store the result as a new
    :class:`StartBacktest` row (returned). With no history or no nodes, the row says
    that nothing was judged. Safe to run twice (each run adds its own row)."""
    started = time.perf_counter()
    trace = site_history(now, days)
    cluster = load_hardware()
    judged = None
    if trace and cluster:
        policy = replace(current_policy(), explain=False, estimates=False)
        judged = backtest(trace, cluster, policy, load_limits()[0], load_accounts())
    return StartBacktest.objects.create(
        ran_at=now,
        days=days,
        jobs=judged.jobs if judged else 0,
        judged=len(judged.checks) if judged else 0,
        p50_coverage=judged.p50_coverage if judged else 0.0,
        p90_coverage=judged.p90_coverage if judged else 0.0,
        p50_error_s=judged.p50_error_s if judged else 0.0,
        wall_s=time.perf_counter() - started,
    )
