"""What the tick reads about running jobs for the core."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.tick.snapshot import load_snapshot
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_a_running_jobs_view_keeps_the_models_its_request_accepted(world: Any, tick: Any) -> None:
    """The workload mix counts what runs by the models it could use (``RunningJob.gpu_model``)."""
    named = submit(world.alice, world.lab, gpu_model="H100-80GB", command="sleep 30")
    anything = submit(world.alice, world.lab, command="sleep 30")
    tick()
    models = {job.id: job.gpu_model for job in load_snapshot().snapshot.running}
    assert models == {named.id: "H100-80GB", anything.id: ""}
