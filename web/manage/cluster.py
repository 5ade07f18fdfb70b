"""The cluster overview: GPU heatmap, queue and utilization charts, the fairness watch
(the last 24 h), GPU-hours by account (and its CSV) over a chosen range."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from monitoring import charts, readings
from monitoring.fairness import open_episode
from monitoring.queue import queue_history
from monitoring.series import series
from scheduler.choices import JobState
from scheduler.models import TickState
from scheduler.reads import reports
from scheduler.reads.fairness import read_fairness
from scheduler.reads.occupancy import Occupancy, read_occupancy
from scheduler.reads.reservations import ahead
from web import figures
from web.manage.access import staff_required

#: Dates a range may use: far enough for any cluster's history, and clear of the
#: calendar's ends (a default start 6 days before 0001-01-03 would overflow).
EARLIEST_DAY = date(2000, 1, 1)


LATEST_DAY = date(9999, 12, 1)


class RangeForm(forms.Form):
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), help_text="Inclusive.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for field in ("start", "end"):
            day = data.get(field)
            if day is not None and not EARLIEST_DAY <= day <= LATEST_DAY:
                self.add_error(field, f"Give a date between {EARLIEST_DAY} and {LATEST_DAY}.")
                data.pop(field, None)
        start, end = data.get("start"), data.get("end")
        if start and end and end < start:
            self.add_error("end", "The end is before the start.")
        return data

    def bounds(self, now: datetime) -> tuple[datetime, datetime]:
        """``[start 00:00, end+1 00:00)`` in UTC; by default the last 7 days."""
        data = self.cleaned_data if self.is_valid() else {}
        today = now.astimezone(UTC).date()
        end_day = data.get("end") or today
        start_day = data.get("start") or end_day - timedelta(days=6)
        try:
            end = datetime.combine(end_day + timedelta(days=1), time(), tzinfo=UTC)
        except OverflowError:
            end = datetime.max.replace(tzinfo=UTC)
        return datetime.combine(start_day, time(), tzinfo=UTC), end


#: Allocated-but-idle GPUs listed under the charts (the heatmap shows them all).
IDLE_LISTED = 20


def cluster_charts(
    start: datetime, end: datetime, now: datetime, jobs: figures.JobsInRange, occupancy: Occupancy
) -> dict[str, Any]:
    """The overview's figures over ``[start, end)`` (clipped to ``now``) and the idle
    allocated GPUs, the GPU ones from the page's ``occupancy``. A fixed number of
    queries; no raw samples beyond the last minutes."""
    until = max(min(end, now), start + timedelta(minutes=1))
    nodes, cells = readings.gpu_grid(now, occupancy)
    window = readings.recent_window()
    utilization = series(None, start, until, "utilization")  # every GPU: no filter on them
    built = {
        "gpu-heatmap": charts.allocation_heatmap(cells, nodes),
        "allocated-utilization": charts.allocated_utilization_figure(
            cells, readings.IDLE_BELOW_PCT, f"last {window.total_seconds() / 60:g} min"
        ),
        # from where the readings begin within the range (a fresh site: its first hour)
        "utilization": charts.band_figure(
            utilization, "GPU utilization, all GPUs", span=(utilization.since or start, until)
        ),
        "queue": charts.queue_figure(queue_history(start, until, settings.MONITORING_CHART_MAX_POINTS), (start, until)),
        "waits": charts.wait_figure(jobs.waits),
        "gpu-hours": charts.gpu_hours_figure([(h.account, h.gpu_hours) for h in jobs.hours]),
    }
    idle = [charts.GpuCell._make(cell) for cell in cells if cell[2] == "allocated, idle"]  # [2]: its state
    return {
        "charts": [(name, figure, f"figure-{name}") for name, figure in built.items()],
        "idle_gpus": idle[:IDLE_LISTED],
        "idle_count": len(idle),
        "idle_below": readings.IDLE_BELOW_PCT,
    }


@staff_required
@require_GET
def cluster_overview(request: HttpRequest) -> HttpResponse:
    """Charts (GPU heatmap, utilization, queue over time, waits, GPU-hours), capacity and
    queue summary, the fairness watch, GPU-hours by account."""
    now = timezone.now()
    form = RangeForm(request.GET or None)
    start, end = form.bounds(now)
    jobs = figures.jobs_in_range(start, end, now) if not form.errors else figures.JobsInRange([], [])
    hours = jobs.hours
    by_state = figures.jobs_by_state()
    # The GPUs and their holders, read once for the capacity table and the GPU charts.
    occupancy = read_occupancy()
    node_states = Counter(state for _, state in occupancy.nodes)
    tick = TickState.objects.filter(pk=1).only("stranded", "stranded_at").first()
    return render(
        request,
        "web/manage/cluster.html",
        {
            "form": form,
            "start": start,
            "end": end,
            "hours": hours,
            "total_hours": sum(h.gpu_hours for h in hours),
            "capacity": figures.free_gpus_by_model(occupancy),
            "stranded": tick.stranded if tick and tick.stranded_at else None,
            # by model name: PostgreSQL's jsonb keeps an object's keys in its own order
            "stranded_rows": sorted((tick.stranded.get("models") or {}).items()) if tick else [],
            "stranded_at": tick.stranded_at if tick else None,
            "backtest": reports.latest_start_backtest(),
            "reservations": ahead(now),
            "jobs_by_state": [(s.label, by_state[s.value]) for s in JobState if by_state[s.value]],
            "node_states": sorted(node_states.items()),
            "csv_query": request.GET.urlencode(),
            "fairness": read_fairness(now),
            "fairness_level": settings.FAIRNESS_WATCH_BELOW,
            "starving": open_episode(),
            **cluster_charts(start, end, now, jobs, occupancy),
        },
    )


@staff_required
@require_GET
def gpu_hours_csv(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    form = RangeForm(request.GET or None)
    if form.errors:
        return HttpResponse("; ".join(str(e) for errs in form.errors.values() for e in errs), status=400)
    start, end = form.bounds(now)
    body = figures.gpu_hours_csv(figures.gpu_hours_by_account(start, end, now), start, end)
    response = HttpResponse(body, content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="gpu-hours-{start:%Y%m%d}-{end:%Y%m%d}.csv"'
    return response
