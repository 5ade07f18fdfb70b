"""Nodes with drain and resume (through ``scheduler.clusters.nodes``)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from common.forms import NulFreeCharField
from monitoring.audit import open_findings_by_node
from scheduler.clusters.nodes import drain_node, resume_node
from scheduler.models import Node
from scheduler.reads.reservations import by_node
from web import figures
from web.manage.access import staff_required


class DrainForm(forms.Form):
    reason = NulFreeCharField(max_length=200, help_text="Shown to users whose jobs wait for this node.")


@staff_required
def nodes(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    reserved = by_node(now)
    findings = open_findings_by_node()
    return render(
        request,
        "web/manage/nodes.html",
        {
            "rows": [
                (row, reserved.get(row.node.name, []), findings.get(row.node.name, [])) for row in figures.node_rows()
            ],
            "drain_form": DrainForm(),
            "now": now,
        },
    )


@staff_required
@require_POST
def node_drain(request: HttpRequest, node_id: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=node_id)
    form = DrainForm(request.POST)
    if not form.is_valid():
        for problem in form.errors.get("reason", []):
            messages.error(request, f"Drain {node.name}: {problem}")
        return redirect("web:manage-nodes")
    reason = form.cleaned_data["reason"]
    drain_node(node, reason=reason, by=request.user)
    messages.success(request, f"{node.name} drained: {reason}")
    return redirect("web:manage-nodes")


@staff_required
@require_POST
def node_resume(request: HttpRequest, node_id: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=node_id)
    resume_node(node, by=request.user)
    messages.success(request, f"{node.name} resumed.")
    return redirect("web:manage-nodes")
