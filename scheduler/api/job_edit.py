"""``PATCH /api/v1/jobs/{id}/``: the body, checked as a submission would be.

Why through ``JobSubmitSerializer``: an edited job must be one the portal would accept
if it were submitted now (the QOS within the account's list and its walltime ceiling,
dependencies on jobs the owner can see, a GPU model some node has), with the same
messages. The job's own request is the base, the edit's fields replace it, and the
whole is validated as its owner's submission; the editor's own rights add two things
(staff may raise a walltime and give a negative nice). Fields that exist but may not
change once submitted get a 400 saying so; unknown ones get the submission's own
"unknown field" answer.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rest_framework import serializers

from common.api.parsers import as_object
from scheduler.api.serializers import JobSubmitSerializer
from scheduler.core.limits import duration_text
from scheduler.jobs.edit import EDITABLE_FIELDS
from scheduler.jobs.request import request_values
from scheduler.models import Job


class JobEditSerializer(serializers.Serializer):
    """The body of ``PATCH /api/v1/jobs/{id}/`` as the schema shows it: any of these, each
    as a submission takes it (checked by :func:`validate_edit`)."""

    name = serializers.CharField(required=False)
    walltime_seconds = serializers.IntegerField(required=False)
    qos = serializers.CharField(required=False, allow_null=True)
    nice = serializers.IntegerField(required=False)
    dependencies = serializers.ListField(child=serializers.DictField(), required=False)
    node_labels = serializers.DictField(child=serializers.CharField(), required=False)
    gpu_model = serializers.CharField(required=False, allow_blank=True)


def submission_of(job: Job) -> dict[str, Any]:
    """The job as the submission body that would create it now."""
    return {
        "name": job.name,
        "account": job.account.name,
        "qos": job.qos.name if job.qos else None,
        **request_values(job),
        "command": job.command,
        "script": job.script,
        "image": job.image,
        "env": dict(job.env or {}),
    }


def _nice(data: dict[str, Any]) -> int | None:
    """The body's nice as a number (a form sends it as text) within the submission's range;
    ``None`` when it has none. Only who may give a negative one is left to the caller."""
    if "nice" not in data:
        return None
    try:
        return int(JobSubmitSerializer._declared_fields["nice"].run_validation(data["nice"]))
    except serializers.ValidationError as exc:
        raise serializers.ValidationError({"nice": exc.detail}) from None


def validate_edit(job: Job, data: Any, editor: Any) -> dict[str, Any]:
    """The model values ``data`` (a PATCH body, JSON or a form) changes, validated; raises
    DRF's ``ValidationError`` (400) naming each field that is wrong."""
    data = as_object(data)
    if not isinstance(data, dict) or not data:
        raise serializers.ValidationError({"non_field_errors": ["Send an object with the fields to change."]})
    fixed = [name for name in data if name in JobSubmitSerializer._declared_fields and name not in EDITABLE_FIELDS]
    if fixed:
        allowed = ", ".join(EDITABLE_FIELDS)
        raise serializers.ValidationError(
            {name: [f"Cannot change once submitted (these can: {allowed}); resubmit as a copy."] for name in fixed}
        )
    base = submission_of(job)
    body = {**base, **data}
    nice = _nice(data)
    staff_nice = editor.is_staff and nice is not None and nice < 0
    if staff_nice or (base["nice"] < 0 and "nice" not in data):
        body["nice"] = 0  # checked as the owner's, who may not set it; staff may (below)
    as_owner = SimpleNamespace(user=job.owner)
    checked = JobSubmitSerializer(data=body, context={"request": as_owner})
    checked.is_valid(raise_exception=True)
    values = dict(checked.validated_data)
    if staff_nice:
        values["nice"] = nice
    errors: dict[str, str] = {}
    if values["walltime_seconds"] > job.walltime_seconds and not editor.is_staff:
        errors["walltime_seconds"] = (
            "Only staff may raise a waiting job's walltime "
            f"(it asks for {duration_text(job.walltime_seconds)}); lower it, or resubmit as a copy with the longer one."
        )
    if any(d["job"] == job.id for d in values["dependencies"]):
        errors["dependencies"] = "A job cannot depend on itself."
    if errors:
        raise serializers.ValidationError(errors)
    return {field: values[field] for field in EDITABLE_FIELDS if field in data}
