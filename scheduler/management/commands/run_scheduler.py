"""Run the scheduler without Celery: poll, tick, refresh estimates when due, record the queue's
history each minute, roll up and prune the GPU samples when due (what beat runs with
Celery), sleep, repeat."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from scheduler import estimates, services

#: Seconds between retention passes (as beat's ``monitoring-prune``).
PRUNE_SECONDS = 3600.0


class Command(BaseCommand):
    help = "Run the scheduling loop in this process (the embedded mode; no Redis or Celery needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once", action="store_true", help="Run one poll, one tick and one estimate pass, then exit."
        )
        parser.add_argument(
            "--interval", type=float, default=None, help="Seconds between ticks (default: SCHEDULER_TICK_SECONDS)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"] if options["interval"] is not None else settings.SCHEDULER_TICK_SECONDS
        if interval <= 0:
            self.stderr.write("--interval must be a positive number of seconds")
            raise SystemExit(2)
        if settings.SCHEDULER_DISPATCH != "inline":
            self.stdout.write("SCHEDULER_DISPATCH=celery: dispatch goes to Celery workers.")
        self.stdout.write(
            f"scheduler loop: tick every {interval:g}s, estimates every "
            f"{settings.SCHEDULER_ESTIMATE_SECONDS:g}s (Ctrl-C to stop)"
        )
        # Estimates plan the whole queue, so they run on their own, slower clock; the
        # first pass runs at once so a fresh loop shows estimates without waiting.
        estimated_at: float | None = None
        queue_at: float | None = None
        rollup_at: float | None = None
        prune_at: float | None = None
        try:
            while True:
                polled = services.poll_backends()
                result = services.run_tick()
                if result.started or options["verbosity"] > 1:
                    self.stdout.write(
                        f"tick: started {len(result.started)} of {result.pending} pending "
                        f"in {result.duration_ms:.1f} ms; clusters {polled}"
                    )
                if estimated_at is None or time.monotonic() - estimated_at >= settings.SCHEDULER_ESTIMATE_SECONDS:
                    written = estimates.refresh_estimates()
                    estimated_at = time.monotonic()
                    if options["verbosity"] > 1:
                        self.stdout.write(f"estimates: {written} changed")
                if settings.MONITORING_SIMULATE:
                    # The demo's GPU telemetry: samples for the local clusters' GPUs.
                    from monitoring.services import record_simulated_samples

                    record_simulated_samples()
                if queue_at is None or time.monotonic() - queue_at >= 60:
                    # The queue's history for the cluster overview (beat does this with Celery).
                    from monitoring.queue import record_queue

                    record_queue()
                    queue_at = time.monotonic()
                if rollup_at is None or time.monotonic() - rollup_at >= settings.MONITORING_ROLLUP_SECONDS:
                    # Minute and hour rollups of the samples (beat's monitoring.rollup):
                    # the overview charts ranges over an hour from them.
                    from monitoring.services import rollup_recent

                    rollup_recent()
                    rollup_at = time.monotonic()
                if prune_at is None or time.monotonic() - prune_at >= PRUNE_SECONDS:
                    from monitoring.services import prune

                    prune()
                    prune_at = time.monotonic()
                if options["once"]:
                    return
                time.sleep(interval)
        except KeyboardInterrupt:
            self.stdout.write("scheduler loop stopped")
