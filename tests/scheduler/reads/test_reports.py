"""sshare and sprio reports, from the same functions the tick uses."""

from __future__ import annotations

import pytest
from django.utils import timezone

from scheduler.models import Usage
from scheduler.reads.reports import fairshare_report, priority_of
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_sshare_ranks_the_idle_account_above_the_busy_one(world):
    Usage.objects.create(account=world.lab, user=world.alice, gpu_seconds=1e6, as_of=timezone.now())
    rows = {(r.account, r.user): r for r in fairshare_report()}
    idle, busy = rows[("other", "charlie")].fairshare, rows[("lab", "alice")].fairshare
    assert idle is not None and busy is not None and idle > busy
    assert rows[("lab", "")].raw_usage == pytest.approx(1e6, rel=1e-3)


def test_sprio_breaks_a_jobs_priority_into_factors(world, settings):
    job = submit(world.charlie, world.other, gpus_per_node=1)
    breakdown = priority_of(job)
    assert breakdown is not None and breakdown.job_id == job.id
    parts = breakdown.age + breakdown.fairshare + breakdown.jobsize + breakdown.qos - breakdown.nice
    assert breakdown.total == pytest.approx(parts)
    assert breakdown.fairshare > 0
    settings.SCHEDULER_PRIORITY = "fifo"
    assert priority_of(job) is None
