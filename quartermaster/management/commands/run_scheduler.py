"""Run the periodic jobs without Celery workers or beat: the embedded mode's scheduler loop.

Runs the same Celery tasks that beat would (``quartermaster.periodic``, one table for both), by
name and in this process, each when its period has passed: poll the clusters, tick,
store start estimates, and the monitoring passes. ``--once`` runs every job once.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

import monitoring.tasks
import notifications.tasks
import people.tasks
import scheduler.tasks
from quartermaster.celery import app as celery_app
from quartermaster.periodic import PeriodicJob, periodic_jobs

log = logging.getLogger(__name__)


def drop_broken_connections() -> None:
    """Close a database connection that failed and no longer answers (the server
    restarted), so the next query opens a new one, as Django does between requests;
    a healthy connection stays open (the loop is one long-lived "request")."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
            connection.close()


#: The tasks the table names (imported above so that they are registered).
TASK_MODULES = (scheduler.tasks, monitoring.tasks, notifications.tasks, people.tasks)

#: The jobs whose period ``--interval`` sets: the loop's heartbeat.
HEARTBEAT = frozenset({"scheduler.tick", "scheduler.poll_backends"})


class Command(BaseCommand):
    help = "Run the scheduling loop in this process (the embedded mode; no Redis or Celery needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run every periodic job once, then exit.")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="Seconds between polls and ticks (default: SCHEDULER_POLL_SECONDS and SCHEDULER_TICK_SECONDS).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval is not None and interval <= 0:
            self.stderr.write("--interval must be a positive number of seconds")
            raise SystemExit(2)
        jobs = [
            PeriodicJob(job.name, job.task, interval) if interval is not None and job.task in HEARTBEAT else job
            for job in periodic_jobs(settings)
        ]
        if settings.SCHEDULER_DISPATCH != "inline":
            self.stdout.write("SCHEDULER_DISPATCH=celery: dispatch goes to Celery workers.")
        self.stdout.write(
            "scheduler loop: "
            + ", ".join(f"{job.task} every {job.every_seconds:g}s" for job in jobs)
            + " (Ctrl-C to stop)"
        )
        last: dict[str, float] = {}
        try:
            while True:
                for job in jobs:
                    if job.name in last and time.monotonic() - last[job.name] < job.every_seconds:
                        continue
                    drop_broken_connections()
                    try:
                        result = celery_app.tasks[job.task]()
                    except Exception as exc:  # one failing job must not stop the others
                        log.exception("periodic job %s failed", job.task)
                        self.stderr.write(f"{job.task} failed: {exc!r}; the loop goes on")
                        result = None
                    last[job.name] = time.monotonic()
                    self._report(job, result, options["verbosity"])
                if options["once"]:
                    return
                due = min(last[job.name] + job.every_seconds for job in jobs)
                time.sleep(max(0.05, due - time.monotonic()))
        except KeyboardInterrupt:
            self.stdout.write("scheduler loop stopped")

    def _report(self, job: PeriodicJob, result: object, verbosity: int) -> None:
        if job.task == "scheduler.tick" and isinstance(result, dict) and (result.get("started") or verbosity > 1):
            self.stdout.write(f"tick: started {result['started']} of {result['pending']} pending")
        elif verbosity > 1:
            self.stdout.write(f"{job.task}: {result}")
