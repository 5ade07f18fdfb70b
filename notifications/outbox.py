"""The notifier's one pass (``notifications.pump``, periodic): read what happened since
the last pass into the outbox, then send what is due.

1. Job events after the cursor (and older than ``SETTLE``, so that a transaction that
   took an id earlier but committed later is not skipped) become messages; the
   deliveries they make and the cursor's move commit together.
2. The queue's conditions (quotas, estimates, the fairness watch's episodes) become
   messages, and the GPU process audit's open findings messages to staff; their keys make
   each fact one message, however many passes see it.
3. Every due delivery is sent: e-mail through Django's mail framework, webhooks as a
   signed POST. A failure is retried with exponential backoff (``backoff``) up to
   ``NOTIFY_MAX_ATTEMPTS``, then marked failed, visible on the user's profile page; a
   webhook that answers 4xx (but 408 and 429) is not tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from notifications import facts, send
from notifications.models import Channel, Cursor, Delivery, Preference, Status, defaults_for
from notifications.wanted import wanted
from scheduler.models import JobEvent

log = logging.getLogger(__name__)

SETTLE = timedelta(seconds=5)
EVENT_BATCH = 2000
SEND_BATCH = 200


def backoff(attempts: int) -> timedelta:
    """Wait before try ``attempts + 1``: 30 s, 1 min, 2 min, ... at most an hour."""
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempts - 1)))


def enqueue(messages: Iterable[facts.Message], now: datetime) -> int:
    """Outbox rows for every channel each message's user asked for, of the messages
    they want (``notifications.wanted``: their choice of events, or their job's own);
    returns how many were new (a key seen before makes none)."""
    messages = list(messages)
    if not messages:
        return 0
    users = {m.user_id for m in messages}
    prefs = {p.user_id: p for p in Preference.objects.filter(user_id__in=users)}
    people = {
        pk: (email, staff)
        for pk, email, staff in get_user_model().objects.filter(pk__in=users).values_list("pk", "email", "is_staff")
    }
    emails = {pk: email for pk, (email, _) in people.items()}
    rows = []
    for message in messages:
        staff = people.get(message.user_id, ("", False))[1]
        pref = prefs.get(message.user_id) or Preference(user_id=message.user_id, events=defaults_for(staff=staff))
        if not wanted(message.event, pref.events, mail_types=message.mail_types, ended=message.ended):
            continue
        channels = []
        if pref.email and emails.get(message.user_id):
            channels.append(Channel.EMAIL)
        if pref.webhook_url:
            channels.append(Channel.WEBHOOK)
        rows += [
            Delivery(
                user_id=message.user_id,
                key=f"{message.key}:{channel}",
                channel=channel,
                event=message.event,
                job_id=message.job_id,
                subject=message.subject[:200],
                body=message.body,
                payload={"event": message.event, "key": message.key, **message.payload},
                next_attempt_at=now,
                created_at=now,
            )
            for channel in channels
        ]
    known = set(Delivery.objects.filter(key__in=[row.key for row in rows]).values_list("key", flat=True))
    Delivery.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return len({row.key for row in rows} - known)


def read_events(now: datetime) -> int:
    """Step 1: new job events into the outbox, with the cursor's move."""
    with transaction.atomic():
        cursor, _ = Cursor.objects.select_for_update().get_or_create(name="job-events")
        events = list(
            JobEvent.objects.filter(id__gt=cursor.position, at__lte=now - SETTLE).order_by("id")[:EVENT_BATCH]
        )
        if not events:
            return 0
        made = enqueue(facts.from_events(events), now)
        cursor.position = events[-1].id
        cursor.save(update_fields=["position"])
    return made


def read_conditions(now: datetime) -> int:
    """Step 2: quotas near their limit, estimates that moved, an account starving; at most every
    ``NOTIFY_CONDITIONS_SECONDS`` (they read every waiting job: not on every pass)."""
    with transaction.atomic():
        last, _ = Cursor.objects.select_for_update().get_or_create(name="conditions")
        if 0 < now.timestamp() - last.position < settings.NOTIFY_CONDITIONS_SECONDS:
            return 0
        last.position = int(now.timestamp())
        last.save(update_fields=["position"])
    return sum(enqueue(found(now), now) for found in (facts.quotas_near, facts.estimates_moved, facts.starving))


def read_findings(now: datetime) -> int:
    """Step 2, for staff: the GPU process audit's open findings, on every pass (a GPU kept
    from jobs is news that should not wait for the conditions' period)."""
    return enqueue(facts.gpu_process_findings(), now)


def send_due(now: datetime) -> dict[str, int]:
    """Step 3: send every due delivery once; returns counts by outcome."""
    due = list(
        Delivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now)
        .select_related("user")
        .order_by("next_attempt_at", "id")[:SEND_BATCH]
    )
    prefs = {p.user_id: p for p in Preference.objects.filter(user_id__in={d.user_id for d in due})}
    outcome = {"sent": 0, "retry": 0, "failed": 0}
    for delivery in due:
        delivery.attempts += 1
        try:
            send.deliver(delivery, prefs.get(delivery.user_id))
        except send.Undeliverable as exc:
            permanent = exc.permanent or delivery.attempts >= settings.NOTIFY_MAX_ATTEMPTS
            delivery.status = Status.FAILED if permanent else Status.PENDING
            delivery.last_error = str(exc)[:500]
            delivery.next_attempt_at = now + backoff(delivery.attempts)
            outcome["failed" if permanent else "retry"] += 1
            log.warning("notification %s: try %s failed: %s", delivery.key, delivery.attempts, exc)
        else:
            delivery.status, delivery.sent_at, delivery.last_error = Status.SENT, timezone.now(), ""
            outcome["sent"] += 1
        delivery.save(update_fields=["attempts", "status", "last_error", "next_attempt_at", "sent_at"])
    return outcome


def pump(now: datetime | None = None) -> dict[str, int]:
    """One pass: steps 1-3."""
    now = now or timezone.now()
    made = read_events(now) + read_conditions(now) + read_findings(now)
    return {"made": made, **send_due(now)}
