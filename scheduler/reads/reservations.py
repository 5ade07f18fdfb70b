"""Reservations for the pages and the submit check (the tick reads them itself, as the
core's windows: ``scheduler.tick.snapshot.load_windows``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from scheduler.models import Reservation


def reservation_problem(name: str, user: Any, account: Any, walltime_seconds: int, now: datetime) -> str | None:
    """Why a job of ``user`` in ``account`` may not ask for reservation ``name``, or
    ``None`` when it may: the reservation exists, has not ended, admits them, and is
    long enough to hold the walltime (a job never runs past its reservation's end)."""
    reservation = Reservation.objects.filter(name=name).first()
    if reservation is None or reservation.end_at <= now:
        return f"There is no reservation {name!r} (or it has ended)."
    if reservation.kind == Reservation.Kind.MAINTENANCE:
        return f"{name!r} is a maintenance window: no job runs in it."
    admitted = (account is not None and reservation.accounts.filter(pk=account.pk).exists()) or (
        reservation.users.filter(pk=user.pk).exists()
    )
    if not admitted:
        return f"Reservation {name!r} is not for you or account {getattr(account, 'name', '?')!r}."
    span = (reservation.end_at - max(reservation.start_at, now)).total_seconds()
    if walltime_seconds > span:
        return f"Reservation {name!r} lasts {int(span)} s more; the walltime ({walltime_seconds} s) must fit inside it."
    return None


def ahead(now: datetime) -> QuerySet[Reservation]:
    """The reservations that have not ended, with what the pages show of them."""
    return Reservation.objects.filter(end_at__gt=now).prefetch_related("nodes", "accounts", "users")


def by_node(now: datetime) -> dict[str, list[Reservation]]:
    """Node name -> the reservations ahead on it, soonest first (for the nodes page)."""
    found: dict[str, list[Reservation]] = {}
    for reservation in ahead(now):
        for node in reservation.nodes.all():
            found.setdefault(node.name, []).append(reservation)
    return found
