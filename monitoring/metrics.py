"""The Prometheus endpoint's figures, read from the database at scrape time.

Several processes (web workers, the scheduler loop, Celery workers) share the work, so
in-process counters would each see a part; the database sees all of it. One scrape costs
a fixed handful of queries whatever the cluster size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from django.db.models import Count
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler.choices import ACTIVE_STATES, EventKind, JobState
from scheduler.jobs.allocations import held_gpus
from scheduler.models import Job, JobEvent, TickState
from scheduler.reads.fairness import read_fairness
from scheduler.tick.snapshot import load_nodes

ANY_MODEL = "any"


class PortalCollector(Collector):
    """Queue, GPU and tick figures for a site's Prometheus and Grafana."""

    def collect(self) -> Iterator[Metric]:
        yield from self._jobs()
        yield from self._gpus()
        yield from self._tick()
        yield from self._fairness()

    def _jobs(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily(
            "quartermaster_jobs_pending", "Jobs waiting to start.", labels=["account", "gpu_model"]
        )
        running = GaugeMetricFamily(
            "quartermaster_jobs_running", "Jobs dispatched or running.", labels=["account", "gpu_model"]
        )
        rows = (
            Job.objects.filter(state__in=[JobState.PENDING, *ACTIVE_STATES])
            .values("state", "account__name", "gpu_model")
            .annotate(n=Count("id"))
            .order_by()
        )
        for row in rows:
            family = pending if row["state"] == JobState.PENDING else running
            family.add_metric([row["account__name"], row["gpu_model"] or ANY_MODEL], row["n"])
        yield pending
        yield running

    def _gpus(self) -> Iterator[Metric]:
        nodes = load_nodes()
        model = {(n.name, g.index): g.model for n in nodes for g in n.gpus}
        held = held_gpus()
        allocated: Counter[str] = Counter(model[key] for key in held if key in model)
        free: Counter[str] = Counter()
        unhealthy: Counter[str] = Counter()
        for node in nodes:
            for gpu in node.gpus:
                free[gpu.model] += 0
                if not gpu.healthy:
                    unhealthy[gpu.model] += 1
                elif node.schedulable and (node.name, gpu.index) not in held:
                    free[gpu.model] += 1
        for name, help_text, counts in (
            ("quartermaster_gpus_allocated", "GPUs held by dispatched or running jobs.", allocated),
            ("quartermaster_gpus_free", "Healthy GPUs on schedulable nodes that no job holds.", free),
            ("quartermaster_gpus_unhealthy", "GPUs kept from new jobs by their health.", unhealthy),
        ):
            family = GaugeMetricFamily(name, help_text, labels=["gpu_model"])
            for gpu_model in sorted(set(free) | set(allocated)):
                family.add_metric([gpu_model], counts.get(gpu_model, 0))
            yield family

    def _tick(self) -> Iterator[Metric]:
        tick = TickState.objects.filter(pk=1).defer("queue_positions").first()
        duration = GaugeMetricFamily("quartermaster_tick_duration_seconds", "Duration of the last scheduling tick.")
        started = GaugeMetricFamily("quartermaster_tick_started_jobs", "Jobs the last tick decided to start.")
        considered = GaugeMetricFamily("quartermaster_tick_pending_jobs", "Pending jobs the last tick considered.")
        finished = GaugeMetricFamily(
            "quartermaster_tick_finished_timestamp_seconds", "When the last tick finished (Unix time)."
        )
        if tick is not None:
            duration.add_metric([], tick.duration_ms / 1000)
            started.add_metric([], tick.started_jobs)
            considered.add_metric([], tick.pending_jobs)
            if tick.finished_at is not None:
                finished.add_metric([], tick.finished_at.timestamp())
        yield from (duration, started, considered, finished)
        errors = CounterMetricFamily(
            "quartermaster_dispatch_errors", "Dispatches that failed and were retried, since the start."
        )
        errors.add_metric([], JobEvent.objects.filter(kind=EventKind.DISPATCH_RETRY).count())
        yield errors

    def _fairness(self) -> Iterator[Metric]:
        """The fairness watch's figures over the last 24 h (``scheduler.reads.fairness``)."""
        fairness = read_fairness(timezone.now())
        jain = GaugeMetricFamily(
            "quartermaster_fairness_jain_index",
            "Jain's index over accounts' mean bounded slowdowns of GPU jobs ended in the last 24 h (1: alike).",
        )
        jain.add_metric([], fairness.jain)
        worst = GaugeMetricFamily(
            "quartermaster_fairness_worst_slowdown_ratio",
            "The worst account's mean bounded slowdown over all jobs' mean, last 24 h.",
            labels=["account"],
        )
        if fairness.worst_account is not None:
            worst.add_metric([fairness.worst_account], fairness.worst_ratio)
        slowdown = GaugeMetricFamily(
            "quartermaster_account_slowdown",
            "Each account's mean bounded slowdown of its GPU jobs ended in the last 24 h.",
            labels=["account"],
        )
        for account, mean in fairness.accounts.items():
            slowdown.add_metric([account], mean)
        yield from (jain, worst, slowdown)
