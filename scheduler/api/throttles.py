"""How often one user may ask "when would this start?", and submit.

A what-if plans the whole queue with the candidate in it: about the cost of a scheduling
tick. Unlimited, one script polling it in a loop would cost the portal as much as a
scheduler running flat out, so each user gets ``SCHEDULER_WHATIF_RATE`` answers (default
30 a minute), on the API and the submit page alike. The count lives in Django's cache,
so with the default local-memory cache it is per web-server process.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class WhatIfThrottle(UserRateThrottle):
    """DRF's per-user sliding window, at the rate the settings give (read at each use so a
    changed setting takes effect without a restart of the class)."""

    scope = "whatif"

    def get_rate(self) -> str:
        return str(settings.SCHEDULER_WHATIF_RATE)


class SubmitThrottle(UserRateThrottle):
    """Submissions per user, ``JOB_SUBMIT_RATE`` (default 60 a minute), on the API and the
    submit page alike: a job array is one submission, however many tasks it has. Why: a
    script submitting in a loop fills the queue and the database faster than anyone can
    cancel it; an array is the way to many jobs at once. Over the rate: 429 with
    ``Retry-After``. Counted in the cache, as the what-if."""

    scope = "submit"

    def get_rate(self) -> str:
        return str(settings.JOB_SUBMIT_RATE)
