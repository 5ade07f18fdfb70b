"""Staff pages for reservations and maintenance windows (``/manage/reservations/``): a
list of those not yet ended with a form to make one, and a page to change or delete one.
The forms are validated by the API's serializer and saved by the same service
(``scheduler.clusters.reservations``: audited, and made in Slurm too).

Both forms have a second button, *Preview cost* (``action=preview``): the same
validation, nothing saved, and the page shows what the window would cost the queue
(``scheduler.reads.reservations.preview_cost``) and, given a range, the start in it
that displaces least, with a button that fills the form with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from scheduler.api.reservations import ReservationSerializer, window_of
from scheduler.clusters.reservations import delete_reservation, save_reservation
from scheduler.core.window_cost import WindowCost
from scheduler.models import Reservation
from scheduler.reads.reservations import NAMED, CostPreview, ahead, preview_cost, suggest_range_problems
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
    suggest_from = forms.DateTimeField(
        required=False,
        label="Suggest a start from (UTC)",
        input_formats=[INPUT_FORMAT],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="For Preview cost: the earliest start you would accept ...",
    )
    suggest_until = forms.DateTimeField(
        required=False,
        label="until (UTC)",
        input_formats=[INPUT_FORMAT],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="... and the latest: the start between them that displaces least is suggested.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not (self.has_error("suggest_from") or self.has_error("suggest_until")):
            for field, problem in suggest_range_problems(data.get("suggest_from"), data.get("suggest_until")).items():
                self.add_error(field, problem)
        return data

    def suggest_range(self) -> tuple[datetime, datetime] | None:
        """The range to search for a start (UTC), if both ends were typed."""
        earliest, latest = self.cleaned_data.get("suggest_from"), self.cleaned_data.get("suggest_until")
        if earliest is None or latest is None:
            return None
        return earliest.replace(tzinfo=UTC), latest.replace(tzinfo=UTC)

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


def _validated(form: ReservationForm, reservation: Reservation | None) -> dict[str, Any] | None:
    """``form`` validated by the API's serializer (as a change of ``reservation``, if
    given); ``None`` (with the errors on the form) when it is not valid."""
    if not form.is_valid():
        return None
    serializer = ReservationSerializer(reservation, data=form.body())
    if not validated(form, serializer):
        return None
    return dict(serializer.validated_data)


def _saved(request: HttpRequest, form: ReservationForm, reservation: Reservation | None) -> Reservation | None:
    """Validate ``form`` and save it; ``None`` (errors on the form) when it is not valid."""
    data = _validated(form, reservation)
    return None if data is None else save_reservation(request.user, reservation, **data)


def _previewed(form: ReservationForm, reservation: Reservation | None) -> dict[str, Any] | None:
    """Validate ``form`` as :func:`_saved` does, save nothing, and say what the window
    would cost (what the page shows of it); ``None`` (errors on the form) when not valid."""
    data = _validated(form, reservation)
    if data is None:
        return None
    span = form.suggest_range()
    earliest, latest = span if span else (None, None)
    replacing = reservation.name if reservation else None
    found = preview_cost(window_of(data), timezone.now(), replacing=replacing, earliest=earliest, latest=latest)
    return _shown(found, form)


def _shown(found: CostPreview, form: ReservationForm) -> dict[str, Any]:
    """A cost preview as the template shows it: the first :data:`NAMED` delays as rows
    with whole seconds (the rest counted), and the form's fields with the suggested span
    in place (the *Use this start* button posts them)."""
    cost = found.cost
    shown: dict[str, Any] = {"cost": _summary(cost), "suggestion": None}
    shown["delays"] = [
        {
            "job_id": d.job_id,
            **dict(zip(("name", "owner", "account"), found.jobs.get(d.job_id, ("", "", "")), strict=True)),
            "gpus": d.gpus,
            "before": d.before,
            "after": d.after,
            "delay_s": None if d.seconds is None else round(d.seconds),
            "gpu_hours": d.gpu_hours,
        }
        for d in cost.delays[:NAMED]
    ]
    shown["more"] = max(0, len(cost.delays) - NAMED)
    shown["overruns"] = cost.overruns
    if found.suggestion is not None:
        best = found.suggestion.best
        typed = {name: value for name, value in form.data.items() if name not in ("csrfmiddlewaretoken", "action")}
        typed |= {"start_at": _typed(best.start_at), "end_at": _typed(best.end_at)}
        shown["suggestion"] = {**_summary(best), "tried": len(found.suggestion.tried), "fields": typed}
    return shown


def _summary(cost: WindowCost) -> dict[str, Any]:
    return {
        "start_at": cost.start_at,
        "end_at": cost.end_at,
        "delayed": len(cost.delays),
        "unplanned": cost.unplanned,
        "gpu_hours": cost.gpu_hours,
        "queued_gpu_hours": cost.queued_gpu_hours,
        "running_gpu_hours": cost.running_gpu_hours,
        "longest_delay_s": max((round(d.seconds) for d in cost.delays if d.seconds is not None), default=0),
    }


def _typed(at: datetime) -> str:
    """``at`` as the form's datetime-local fields take it (UTC), rounded up to the
    minute: a start suggested at a job's end stays no earlier than that end."""
    at = at.astimezone(UTC)
    if at.second or at.microsecond:
        at = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return at.strftime(INPUT_FORMAT)


def _posted(
    request: HttpRequest, form: ReservationForm, reservation: Reservation | None, verb: str
) -> tuple[dict[str, Any] | None, HttpResponse | None]:
    """What a POST of either form answers: *Preview cost* gives the preview to show (or
    ``None`` with errors on the form); a save that went through gives the redirect to the
    list, said as ``verb`` ("made", "saved"). A GET gives neither."""
    if request.method != "POST":
        return None, None
    if request.POST.get("action") == "preview":
        return _previewed(form, reservation), None
    saved = _saved(request, form, reservation)
    if saved is None:
        return None, None
    messages.success(request, f"Reservation {saved.name} {verb}.")
    return None, redirect("web:manage-reservations")


@staff_required
def reservations(request: HttpRequest) -> HttpResponse:
    form = ReservationForm(request.POST or None)
    preview, done = _posted(request, form, None, "made")
    if done is not None:
        return done
    now = timezone.now()
    context = {"reservations": ahead(now), "form": form, "now": now, "preview": preview}
    return render(request, "web/manage/reservations.html", context)


@staff_required
def reservation_edit(request: HttpRequest, reservation_id: int) -> HttpResponse:
    reservation = get_object_or_404(Reservation, pk=reservation_id)
    form = ReservationForm(request.POST or None, initial=_initial(reservation))
    preview, done = _posted(request, form, reservation, "saved")
    if done is not None:
        return done
    context = {"reservation": reservation, "form": form, "preview": preview}
    return render(request, "web/manage/reservation_edit.html", context)


@staff_required
@require_POST
def reservation_delete(request: HttpRequest, reservation_id: int) -> HttpResponse:
    reservation = get_object_or_404(Reservation, pk=reservation_id)
    delete_reservation(request.user, reservation)
    messages.success(request, f"Reservation {reservation.name} deleted.")
    return redirect("web:manage-reservations")
