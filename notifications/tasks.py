"""The notifier's periodic task; beat (or ``run_scheduler``) runs it every
``NOTIFY_SECONDS``."""

from __future__ import annotations

from celery import shared_task

from notifications import outbox


@shared_task(name="notifications.pump", ignore_result=True)
def pump() -> dict[str, int]:
    """Read what happened into the outbox and send what is due (``notifications.outbox``)."""
    return outbox.pump()
