"""Who may pass the proxy to a session, and where it leads: the portal's login (its
session cookie, through Django's session engine and auth), the session's owner, its state.

Every function here is synchronous and reads the database: the proxy calls them through
``asgiref.sync.sync_to_async``. :class:`DecisionCache` spares a notebook's many requests
a database round trip each, for a few seconds at most, so a logout or an ended session
takes effect within that bound.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from importlib import import_module
from types import SimpleNamespace
from typing import Any, cast

from django.conf import settings
from django.contrib import auth
from django.db import close_old_connections
from django.db.models import Q
from django.http import HttpRequest

from scheduler.choices import TERMINAL_STATES
from scheduler.models import InteractiveSession

#: How long a "pass" decision is reused; a logout or an ended session is seen after at most this.
DECISION_SECONDS = 5.0
#: How many (cookie, session) decisions a process keeps, the least recently used dropped.
DECISION_ENTRIES = 4096
#: ``last_activity_at`` is written at most this often per session (the idle rule counts minutes).
ACTIVITY_EVERY = timedelta(minutes=1)


class Verdict(StrEnum):
    PASS = "pass"
    LOGIN = "login"  # no valid login: anonymous, logged out, expired, inactive user
    FORBIDDEN = "forbidden"  # another user's session (staff included)
    NOT_FOUND = "not_found"  # no such session
    STARTING = "starting"  # queued, or its server not ready yet
    ENDED = "ended"  # its job has ended
    REFUSED = "refused"  # its host or port is not one the proxy may reach
    UNAVAILABLE = "unavailable"  # the portal's database cannot be reached for the moment


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where a session's server listens, and the secret that proves the portal sends the
    request (``None`` when its app checks nothing itself, ``secret_via == "none"``)."""

    host: str
    port: int
    secret: str | None


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    upstream: Upstream | None = None


def decide(session_key: str, job_id: int) -> Decision:
    """Whether the holder of the portal session ``session_key`` may reach session
    ``job_id`` now, and where. Reads the database; never raises for bad input (an
    unknown or forged key is simply no login)."""
    close_old_connections()  # what Django does around each request: CONN_MAX_AGE, broken connections
    try:
        user = user_of(session_key)
        if user is None:
            return Decision(Verdict.LOGIN)
        return decide_for(user.pk, job_id)
    finally:
        close_old_connections()


def user_of(session_key: str) -> Any | None:
    """The active user logged in with the portal session ``session_key``, or ``None``.

    Through Django's own session engine and ``auth.get_user``, so an expired session,
    a changed password (the session's hash no longer matches) and a deactivated user
    are refused exactly as the portal's pages refuse them."""
    if not session_key:
        return None
    engine = import_module(settings.SESSION_ENGINE)
    request = SimpleNamespace(session=engine.SessionStore(session_key))  # all get_user reads
    user = auth.get_user(cast(HttpRequest, request))
    return user if user.is_authenticated and user.is_active else None


def decide_for(user_id: int, job_id: int) -> Decision:
    """Steps: 1. the session exists; 2. ``user_id`` owns its job (nobody else, staff
    included); 3. its job has not ended; 4. its server reported ready; 5. its host and
    port are ones the proxy may reach (defence in depth: the readiness code checks too)."""
    row = (
        InteractiveSession.objects.select_related("job", "app")
        .only("host", "port", "ready_at", "secret", "job__owner_id", "job__state", "app__secret_via")
        .filter(pk=job_id)
        .first()
    )
    if row is None:
        return Decision(Verdict.NOT_FOUND)
    if row.job.owner_id != user_id:
        return Decision(Verdict.FORBIDDEN)
    if row.job.state in TERMINAL_STATES:
        return Decision(Verdict.ENDED)
    if row.ready_at is None or row.port is None or not row.host:
        return Decision(Verdict.STARTING)
    if not reachable(row.host, row.port):
        return Decision(Verdict.REFUSED)
    secret = row.secret if row.app.secret_via == "header" else None
    return Decision(Verdict.PASS, Upstream(host=row.host, port=row.port, secret=secret))


_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?")


def reachable(host: str, port: int) -> bool:
    """A port within ``SESSION_PORTS`` on a plain host name or IP address (nothing that
    could change the URL built from it: no ``/``, ``@``, ``:`` outside an IPv6 address)."""
    low, high = settings.SESSION_PORTS
    if not low <= port <= high:
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return bool(_HOST_NAME.fullmatch(host))
    return True


def touch_activity(job_id: int, now: datetime) -> bool:
    """Record a request through the proxy to session ``job_id`` at ``now``, unless one was
    recorded less than :data:`ACTIVITY_EVERY` before (a conditional UPDATE, so several web
    workers together still write at most once a minute). Returns whether it wrote."""
    close_old_connections()
    try:
        recent = Q(last_activity_at__gt=now - ACTIVITY_EVERY)
        return bool(InteractiveSession.objects.filter(pk=job_id).exclude(recent).update(last_activity_at=now))
    finally:
        close_old_connections()


class DecisionCache:
    """Decisions by key for ``seconds`` (on ``clock``), at most ``size`` of them, the least
    recently used dropped first. Only what is put is kept: the proxy puts passes only, so
    a session becoming ready, or a user logging in, is seen at once."""

    def __init__(
        self,
        seconds: float = DECISION_SECONDS,
        size: int = DECISION_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds, self.size, self.clock = seconds, size, clock
        self._entries: OrderedDict[Hashable, tuple[float, Decision]] = OrderedDict()

    def get(self, key: Hashable) -> Decision | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, decision = entry
        if self.clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return decision

    def put(self, key: Hashable, decision: Decision) -> None:
        self._entries[key] = (self.clock() + self.seconds, decision)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class ActivityGate:
    """Whether a session's activity is due to be written again: once per ``every`` per
    session in this process, so a burst of requests costs one UPDATE, not one each.
    Bounded: past ``size`` sessions, those not seen for ``every`` are forgotten."""

    def __init__(
        self,
        every: timedelta = ACTIVITY_EVERY,
        size: int = DECISION_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every, self.size, self.clock = every.total_seconds(), size, clock
        self._last: dict[int, float] = {}

    def due(self, job_id: int) -> bool:
        now = self.clock()
        last = self._last.get(job_id)
        if last is not None and now - last < self.every:
            return False
        self._last[job_id] = now
        if len(self._last) > self.size:
            self._last = {key: at for key, at in self._last.items() if now - at < self.every}
        return True
