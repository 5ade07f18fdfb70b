"""``Job.allocations`` has one codec: what the claim writes, every reader reads back."""

from __future__ import annotations

import pytest

from scheduler.core.types import Allocation
from scheduler.jobs import allocations
from scheduler.jobs.allocations import decode, encode, gpus_of, held_gpus
from scheduler.models import Job
from tests.builders import submit

WHOLE = Allocation(node="h100-01", gpu_indices=(0, 3), cpu_millis=16_000, memory_mib=65536)
SHARE = Allocation(node="l4-01", gpu_indices=(2,), cpu_millis=500, memory_mib=4096, gpu_share=0.5, gpu_memory_mib=8192)


def test_what_is_encoded_decodes_to_the_same_allocations() -> None:
    assert decode(encode((WHOLE, SHARE))) == (WHOLE, SHARE)


def test_cpus_are_stored_as_people_read_them_whole_or_in_part() -> None:
    whole, share = encode((WHOLE, SHARE))
    assert (whole["cpus"], share["cpus"]) == (16, 0.5)
    assert isinstance(whole["cpus"], int)


def test_share_fields_are_stored_only_for_a_fractional_job() -> None:
    whole, share = encode((WHOLE, SHARE))
    assert "gpu_share" not in whole and "gpu_memory_mib" not in whole
    assert share["gpu_share"] == 0.5 and share["gpu_memory_mib"] == 8192


@pytest.mark.parametrize(
    "stored",
    [None, [], [{"node": "n1"}], [{"node": "n1", "gpu_indices": None, "cpus": None}]],
    ids=["null", "empty", "node only", "nulls"],
)
def test_rows_written_before_a_field_existed_read_as_zero_or_empty(stored) -> None:
    decoded = decode(stored)
    assert all(a.gpu_indices == () and a.cpu_millis == 0 and a.gpu_share == 0.0 for a in decoded)


def test_gpus_of_lists_every_node_and_index() -> None:
    assert gpus_of(encode((WHOLE, SHARE))) == {("h100-01", 0), ("h100-01", 3), ("l4-01", 2)}


@pytest.mark.django_db
def test_held_gpus_are_those_of_active_jobs_only(world) -> None:
    running, ended = submit(world.alice, world.lab), submit(world.alice, world.lab)
    Job.objects.filter(pk=running.pk).update(state="RUNNING", allocations=encode((WHOLE,)))
    Job.objects.filter(pk=ended.pk).update(state="COMPLETED", allocations=encode((SHARE,)))
    assert held_gpus() == {("h100-01", 0), ("h100-01", 3)}
    assert allocations.held_gpus is held_gpus
