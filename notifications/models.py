"""Who wants to hear about what, and every message sent (or still being tried).

``Delivery`` is an outbox: a row per message and channel, made in a transaction of its
own from facts already committed (job events, the queue's state), unique by its
idempotency key, and sent afterwards with retries. So a message is never lost (a crash
between making and sending it leaves a pending row) nor sent twice for one fact (the key),
and a channel that fails never blocks or rolls back what the scheduler does.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models


class Event(models.TextChoices):
    STARTED = "started", "a job started"
    ENDED = "ended", "a job ended (completed, failed, timed out, node failure)"
    PREEMPTED = "preempted", "a job was preempted or requeued"
    HELD = "held", "a job was held by someone else (an admin)"
    ESTIMATE_MOVED = "estimate_moved", "a waiting job's estimated start moved a lot"
    QUOTA_NEAR = "quota_near", "an account of mine uses 80% of a GPU quota"
    IDLE = "idle", "a running job of mine holds GPUs it does not use"
    STARVING = "starving", "(staff) an account's jobs wait far longer than others'"
    GPU_PROCESS = "gpu_process", "(staff) a GPU runs a process no job accounts for"


class Channel(models.TextChoices):
    EMAIL = "email", "e-mail"
    WEBHOOK = "webhook", "webhook"


class WebhookFormat(models.TextChoices):
    JSON = "json", "JSON (signed with HMAC-SHA256)"
    SLACK = "slack", "Slack-compatible ({'text': ...}, signed too)"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def default_events() -> list[str]:
    """What a user is told without having chosen: their jobs started, ended, held by
    someone else, or holding idle GPUs."""
    return [Event.STARTED.value, Event.ENDED.value, Event.HELD.value, Event.IDLE.value]


#: Notices to staff about the site (made only for staff: an account starving, a GPU
#: process no job accounts for), offered to staff alone and on until they untick them.
STAFF_EVENTS: frozenset[str] = frozenset({Event.STARVING.value, Event.GPU_PROCESS.value})


def defaults_for(*, staff: bool) -> list[str]:
    """What a user is told without having chosen: ``default_events``, and for staff the
    notices about the site (:data:`STAFF_EVENTS`) too."""
    return default_events() + (sorted(STAFF_EVENTS) if staff else [])


def offered(*, staff: bool) -> list[tuple[str, str]]:
    """The events a user may choose: staff's events for staff only."""
    return [(value, label) for value, label in Event.choices if staff or value not in STAFF_EVENTS]


class Preference(models.Model):
    """One user's choices. Without a row, the defaults (``of``): e-mail, if the user has an
    address, for ``defaults_for`` them."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify")
    events = models.JSONField(default=default_events, help_text="The Event values to be told about.")
    email = models.BooleanField(default=True)
    webhook_url = models.URLField(blank=True, max_length=500)
    webhook_format = models.CharField(max_length=8, choices=WebhookFormat.choices, default=WebhookFormat.JSON)
    webhook_secret = models.CharField(max_length=64, default=new_secret, help_text="Signs each webhook body.")

    def __str__(self) -> str:
        return f"notification preferences of {self.user}"

    @classmethod
    def of(cls, user_id: int, *, staff: bool = False) -> Preference:
        """The user's stored choices, or the defaults (unsaved) when they made none
        (``defaults_for``: say whether the user is ``staff``)."""
        return cls.objects.filter(user_id=user_id).first() or cls(user_id=user_id, events=defaults_for(staff=staff))


class Status(models.TextChoices):
    PENDING = "pending", "pending"
    SENT = "sent", "sent"
    FAILED = "failed", "failed (gave up)"


class Delivery(models.Model):
    """One message on one channel: the outbox and the delivery log the user sees."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="deliveries")
    key = models.CharField(max_length=200, unique=True, help_text="Idempotency: one message per fact and channel.")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    event = models.CharField(max_length=16, choices=Event.choices)
    job = models.ForeignKey("scheduler.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    subject = models.CharField(max_length=200)
    body = models.TextField()
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.channel} to {self.user}: {self.subject}"


class Cursor(models.Model):
    """How far the job events have been read (one row, ``name`` "job-events")."""

    name = models.CharField(max_length=32, unique=True)
    position = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} at {self.position}"


class EstimateSeen(models.Model):
    """The estimated start a waiting job's owner was last told of (or first saw)."""

    job = models.OneToOneField("scheduler.Job", on_delete=models.CASCADE, related_name="+")
    estimate = models.DateTimeField()

    def __str__(self) -> str:
        return f"job {self.job_id} expected by {self.estimate:%Y-%m-%d %H:%M}"
