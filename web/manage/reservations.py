"""Staff pages for reservations and maintenance windows (``/manage/reservations/``): a
list of those not yet ended with a form to make one, and a page to change or delete one.
The forms are validated by the API's serializer and saved by the same service
(``scheduler.clusters.reservations``: audited, and made in Slurm too)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from scheduler.api.reservations import ReservationSerializer
from scheduler.clusters.reservations import delete_reservation, save_reservation
from scheduler.models import Reservation
from scheduler.reads.reservations import ahead
from web.manage.access import staff_required, validated

#: How a span's ends are typed: a browser's datetime-local, read as UTC.
INPUT_FORMAT = "%Y-%m-%dT%H:%M"


def _names(text: str) -> list[str]:
    return [name for name in (part.strip() for part in text.replace("\n", ",").split(",")) if name]


class ReservationForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="Letters, digits, '-' and '_'; jobs ask for it by this name.")
    kind = forms.ChoiceField(choices=Reservation.Kind.choices)
    start_at = forms.DateTimeField(
        label="Start (UTC)", input_formats=[INPUT_FORMAT], widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    end_at = forms.DateTimeField(
        label="End (UTC)", input_formats=[INPUT_FORMAT], widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    nodes = forms.CharField(required=False, help_text="Node names, comma-separated: gpu-01, gpu-02.")
    gpus = forms.IntegerField(required=False, min_value=1, label="Or GPUs", help_text="... a number of GPUs")
    gpu_model = forms.CharField(required=False, label="of model", help_text="of this model: nodes chosen for you.")
    accounts = forms.CharField(required=False, help_text="For a reservation: the accounts it is for.")
    users = forms.CharField(required=False, help_text="... and users (usernames).")

    def body(self) -> dict[str, Any]:
        """The API's body for what was typed (times as UTC)."""
        data = self.cleaned_data
        body: dict[str, Any] = {
            "name": data["name"],
            "kind": data["kind"],
            "start_at": data["start_at"].replace(tzinfo=UTC).isoformat(),
            "end_at": data["end_at"].replace(tzinfo=UTC).isoformat(),
            "accounts": _names(data.get("accounts") or ""),
            "users": _names(data.get("users") or ""),
        }
        if data.get("gpus") or data.get("gpu_model"):
            body |= {"gpus": data.get("gpus") or 0, "gpu_model": data.get("gpu_model") or ""}
        if _names(data.get("nodes") or "") or "gpus" not in body:
            body["nodes"] = _names(data.get("nodes") or "")
        return body


def _initial(reservation: Reservation) -> dict[str, Any]:
    def typed(at: datetime) -> str:
        return at.astimezone(UTC).strftime(INPUT_FORMAT)

    return {
        "name": reservation.name,
        "kind": reservation.kind,
        "start_at": typed(reservation.start_at),
        "end_at": typed(reservation.end_at),
        "nodes": ", ".join(sorted(n.name for n in reservation.nodes.all())) if not reservation.gpus else "",
        "gpus": reservation.gpus or "",
        "gpu_model": reservation.gpu_model,
        "accounts": ", ".join(sorted(a.name for a in reservation.accounts.all())),
        "users": ", ".join(sorted(u.get_username() for u in reservation.users.all())),
    }


def _saved(request: HttpRequest, form: ReservationForm, reservation: Reservation | None) -> Reservation | None:
    """Validate ``form`` through the API serializer and save it; ``None`` (with the
    errors on the form) when it is not valid."""
    if not form.is_valid():
        return None
    serializer = ReservationSerializer(reservation, data=form.body())
    if not validated(form, serializer):
        return None
    return save_reservation(request.user, reservation, **serializer.validated_data)


@staff_required
def reservations(request: HttpRequest) -> HttpResponse:
    form = ReservationForm(request.POST or None)
    if request.method == "POST":
        made = _saved(request, form, None)
        if made is not None:
            messages.success(request, f"Reservation {made.name} made.")
            return redirect("web:manage-reservations")
    now = timezone.now()
    return render(request, "web/manage/reservations.html", {"reservations": ahead(now), "form": form, "now": now})


@staff_required
def reservation_edit(request: HttpRequest, reservation_id: int) -> HttpResponse:
    reservation = get_object_or_404(Reservation, pk=reservation_id)
    form = ReservationForm(request.POST or None, initial=_initial(reservation))
    if request.method == "POST":
        saved = _saved(request, form, reservation)
        if saved is not None:
            messages.success(request, f"Reservation {saved.name} saved.")
            return redirect("web:manage-reservations")
    return render(request, "web/manage/reservation_edit.html", {"reservation": reservation, "form": form})


@staff_required
@require_POST
def reservation_delete(request: HttpRequest, reservation_id: int) -> HttpResponse:
    reservation = get_object_or_404(Reservation, pk=reservation_id)
    delete_reservation(request.user, reservation)
    messages.success(request, f"Reservation {reservation.name} deleted.")
    return redirect("web:manage-reservations")
