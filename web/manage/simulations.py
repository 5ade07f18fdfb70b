"""Staff pages for simulator runs: a preview of an account change is asked for on the
account's page (``POST /manage/accounts/<id>/preview/``), a replay on the simulator page
(``/manage/simulator/``: upload a trace or use the site's history, choose policies and a
cluster); ``/manage/simulations/<id>/`` follows either (a progress bar polling the API)
to its figures, as a table and a chart. Nothing about accounts changes here."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from monitoring import charts
from people.models import Account
from scheduler.api.simulations import PreviewRequestSerializer
from scheduler.models import Simulation
from scheduler.simulations import start_preview, start_replay
from web.manage.access import staff_required, validated
from web.manage.simulation_forms import PreviewForm, SimulatorForm


@staff_required
@require_POST
def preview_start(request: HttpRequest, account_id: int) -> HttpResponse:
    account = get_object_or_404(Account, pk=account_id)
    form = PreviewForm(request.POST)
    if form.is_valid():
        serializer = PreviewRequestSerializer(data=form.body())
        if validated(form, serializer):
            data = serializer.validated_data
            row = start_preview(
                request.user, account, days=data["days"], shares=data.get("shares"), limits=data.get("limits")
            )
            return redirect("web:manage-simulation", simulation_id=row.pk)
    for field, problems in form.errors.items():
        messages.error(request, f"Preview: {field}: {' '.join(str(p) for p in problems)}")
    return redirect("web:manage-account", account_id=account.pk)


@staff_required
def simulator(request: HttpRequest) -> HttpResponse:
    form = SimulatorForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        upload = data.get("trace")
        row = start_replay(
            request.user,
            policies=data["policies"],
            nodes=data.get("nodes"),
            gpus_per_node=data.get("gpus_per_node") or 8,
            trace=data.get("trace_text", ""),
            trace_name=upload.name[:200] if upload is not None else "",
            days=0 if upload is not None else data["days"],
        )
        return redirect("web:manage-simulation", simulation_id=row.pk)
    recent = Simulation.objects.select_related("account").defer("trace", "result")[:20]
    return render(request, "web/manage/simulator.html", {"form": form, "recent": recent})


@staff_required
def simulation_page(request: HttpRequest, simulation_id: int) -> HttpResponse:
    row = get_object_or_404(Simulation.objects.select_related("account").defer("trace"), pk=simulation_id)
    result = row.result if row.state == Simulation.State.DONE else None
    figure = None
    if result and row.kind == Simulation.Kind.PREVIEW and result["rows"]:
        figure = charts.preview_figure(result["rows"])
        for line in result["rows"]:  # the difference the change makes, signed, in hours
            line["wait_change"] = f"{(line['proposed']['avg_wait_s'] - line['today']['avg_wait_s']) / 3600:+.1f}"
            _in_hours(line["today"], line["proposed"])
    elif result and row.kind == Simulation.Kind.REPLAY:
        figure = charts.replay_figure(result["policies"])
        _in_hours(result["bounds"], *result["policies"])
    return render(
        request,
        "web/manage/simulation.html",
        {"run": row, "result": result, "figure": figure, "params": row.params or {}},
    )


def _in_hours(*figures: dict[str, Any]) -> None:
    """Beside every ``..._s`` figure (seconds), its ``..._h`` in hours to one decimal, as
    the tables show them (the chart's bars are in hours too)."""
    for each in figures:
        for key in [k for k in each if k.endswith("_s")]:
            each[key[:-2] + "_h"] = f"{each[key] / 3600:.1f}"
