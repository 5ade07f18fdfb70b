"""Whether a job may ask for a reservation: the submit check (the tick reads the
reservations themselves in ``scheduler.tick.snapshot.load_windows``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

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
