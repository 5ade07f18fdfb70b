"""Serializers that build their fields once per class answer exactly as DRF's own
per-instance fields would, keep each request's context their own, and refuse fields
that would read the shared copy's serializer instead of the one at hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict

from common.api.shared_fields import FieldsBuiltOnce, shared_fields
from monitoring.models import JobEfficiency
from scheduler.api.serializers import JobSerializer, JobSubmitSerializer
from scheduler.jobs.array_spec import parse_array
from scheduler.models import Job
from tests.builders import run_attempt, submit

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 2, tzinfo=UTC)


def drf_answer(serializer: serializers.Serializer, instance: Any) -> dict[str, Any]:
    """What DRF itself answers: fields built for this one serializer, DRF's loop."""
    own = BindingDict(serializer)
    for name, field in serializer.get_fields().items():
        own[name] = field
    serializer.__dict__["fields"] = own  # DRF's `fields` is a cached property
    return dict(serializers.Serializer.to_representation(serializer, instance))


def jobs_in_every_shape(world: Any) -> list[Job]:
    waiting = submit(world.alice, world.lab, env={"SEED": "1"}, node_labels={"rack": "r1"}, cpus_per_node="0.5")
    Job.objects.filter(pk=waiting.pk).update(
        pending_reason="Resources",
        pending_blockers=[{"code": "Resources", "message": "no 1-GPU room", "evidence": {"free": 0}}],
        estimated_start_at=DAY + timedelta(hours=2),
    )
    ran = submit(world.alice, world.lab, gpus_per_node=2, dependencies=[{"type": "afterok", "job": waiting.pk}])
    run_attempt(ran, DAY, DAY + timedelta(hours=1), gpus=2)
    JobEfficiency.objects.create(
        job=ran, attempt=ran.attempt, gpu_hours=2, elapsed_seconds=3600, samples=10, gpu_util_mean=50, computed_at=DAY
    )
    running = submit(world.dora, world.lab)
    run_attempt(running, DAY, None)
    task = submit(world.alice, world.lab, array=parse_array("0-3%2", max_size=100))
    return list(
        Job.objects.select_related("owner", "account", "qos", "cluster", "efficiency")
        .filter(pk__in=[waiting.pk, ran.pk, running.pk, task.pk])
        .order_by("pk")
    )


@pytest.mark.parametrize(
    "context",
    [{}, {"just_submitted": True}, {"folded": {}}],
    ids=["a job page", "just submitted", "a list"],
)
def test_a_job_reads_exactly_as_drf_would_answer_it(world, context):
    for job in jobs_in_every_shape(world):
        assert JobSerializer(job, context=context).data == drf_answer(JobSerializer(context=context), job)


def test_a_listed_job_reads_as_drf_would_answer_it_with_the_lists_own_context(world):
    jobs = jobs_in_every_shape(world)
    folded = {jobs[-1].pk: {"label": f"{jobs[-1].pk}_[0-3]", "tasks": 4}}

    listed = JobSerializer(jobs, many=True, context={"folded": folded}).data

    assert [row["display_id"] for row in listed][-1] == f"{jobs[-1].pk}_[0-3]"
    assert listed == [drf_answer(JobSerializer(context={"folded": folded}), job) for job in jobs]


def test_every_instance_of_a_class_uses_the_same_fields(world):
    job = jobs_in_every_shape(world)[0]

    assert JobSerializer(job).fields is JobSerializer(context={"other": 1}).fields
    assert JobSerializer(job).fields is shared_fields(JobSerializer)


def test_each_submission_is_validated_with_its_own_requester(world):
    body = {"name": "x", "command": "true", "walltime_seconds": 60, "nice": -5, "account": "lab"}
    as_alice = JobSubmitSerializer(data=body, context={"request": SimpleNamespace(user=world.alice)})
    as_admin = JobSubmitSerializer(data=body, context={"request": SimpleNamespace(user=world.admin)})

    assert not as_alice.is_valid()
    assert "Only staff" in str(as_alice.errors["nice"][0])
    assert as_admin.is_valid(), as_admin.errors
    assert as_admin.validated_data["nice"] == -5


def test_an_invalid_submission_leaves_nothing_behind_for_the_next(world):
    context = {"request": SimpleNamespace(user=world.alice)}
    bad = JobSubmitSerializer(data={"name": "x", "walltime_seconds": 0, "gpus": 2}, context=context)
    good = JobSubmitSerializer(data={"name": "y", "command": "true", "walltime_seconds": 60}, context=context)

    assert not bad.is_valid()
    assert set(bad.errors) >= {"walltime_seconds", "gpus"}
    assert good.is_valid(), good.errors
    assert good.validated_data["name"] == "y"


class _Holder(serializers.Serializer):
    now = serializers.SerializerMethodField()

    def get_now(self, _: Any) -> str:
        return str(self.context.get("now"))


@pytest.mark.parametrize(
    ("field", "why"),
    [
        (serializers.HiddenField(default=serializers.CurrentUserDefault()), "its default reads"),
        (serializers.HyperlinkedRelatedField(view_name="job-detail", read_only=True), "hyperlinked"),
        (_Holder(), "nested serializer's method field"),
    ],
    ids=["the current user", "a hyperlink", "a nested method field"],
)
def test_a_field_that_reads_its_serializer_cannot_be_shared(field, why):
    unshareable = type("Unshareable", (FieldsBuiltOnce,), {"field": field})

    with pytest.raises(TypeError, match=why):
        unshareable(data={}).is_valid()


def test_a_partial_update_is_refused():
    with pytest.raises(TypeError, match="partial update"):
        JobSubmitSerializer(data={}, partial=True).is_valid()
