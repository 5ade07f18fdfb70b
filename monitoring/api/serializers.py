"""Shapes of the monitoring API, for the schema. Ingest validates by hand
(``monitoring.ingest``) for speed; these document the same fields."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from monitoring.ingest import MAX_PROCESS_COMMAND, MAX_PROCESS_USER
from monitoring.models import ProcessFinding
from monitoring.sample_fields import MAX_THROTTLE_REASON, SAMPLE_FIELDS, SampleField
from monitoring.series import METRICS


class ProcessSerializer(serializers.Serializer):
    pid = serializers.IntegerField()
    used_memory_mib = serializers.IntegerField(required=False)
    uid = serializers.IntegerField(required=False, min_value=0, help_text="The owner's numeric user id.")
    user = serializers.CharField(required=False, max_length=MAX_PROCESS_USER, help_text="The owner's user name.")
    command = serializers.CharField(required=False, max_length=MAX_PROCESS_COMMAND, help_text="Its command name.")


class SampleSerializer(serializers.Serializer):
    """One reading of one GPU."""

    # The fields and their bounds are monitoring.sample_fields', as the validator's.

    def get_fields(self) -> dict[str, serializers.Field]:
        return {f.name: _sample_field(f) for f in SAMPLE_FIELDS}


def _sample_field(f: SampleField) -> serializers.Field:
    """The schema's field for one sample field."""
    kwargs: dict[str, Any] = {"required": f.required}
    if f.meaning:
        kwargs["help_text"] = f.meaning
    if f.nullable:
        kwargs["allow_null"] = True
    if f.kind in ("number", "integer"):
        whole = int if f.kind == "integer" else float
        if f.minimum is not None:
            kwargs["min_value"] = whole(f.minimum)
        if f.maximum is not None:
            kwargs["max_value"] = whole(f.maximum)
        return serializers.IntegerField(**kwargs) if f.kind == "integer" else serializers.FloatField(**kwargs)
    if f.kind == "time":
        return serializers.DateTimeField(**kwargs)
    if f.kind == "text":
        return serializers.CharField(max_length=int(f.maximum or 0), **kwargs)
    if f.name == "processes":
        return ProcessSerializer(many=True, max_length=int(f.maximum or 0), **kwargs)  # type: ignore[call-arg]
    return serializers.ListField(child=serializers.CharField(max_length=MAX_THROTTLE_REASON), **kwargs)


class SampleBatchSerializer(serializers.Serializer):
    node = serializers.CharField(required=False, help_text="The posting node's name; must be the token's node.")
    samples = SampleSerializer(many=True)


class RejectedSampleSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Position of the sample in the batch.")
    errors = serializers.DictField(child=serializers.CharField())  # type: ignore[assignment]


class IngestResultSerializer(serializers.Serializer):
    received = serializers.IntegerField()
    accepted = serializers.IntegerField(help_text="Valid samples, stored now or already stored (idempotent).")
    rejected = RejectedSampleSerializer(many=True)
    drained = serializers.BooleanField(help_text="The node was drained for a critical XID in this batch.")


class SeriesQuerySerializer(serializers.Serializer):
    gpus = serializers.CharField(required=False, help_text="Comma-separated GPU ids; all GPUs if omitted.")
    node = serializers.CharField(required=False, help_text="Only this node's GPUs.")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(required=False, help_text="Default: now.")
    metric = serializers.ChoiceField(choices=sorted(METRICS), default="utilization")


class SeriesPointSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    low = serializers.FloatField()
    mean = serializers.FloatField()
    high = serializers.FloatField()


class SeriesSerializer(serializers.Serializer):
    metric = serializers.CharField()
    resolution = serializers.IntegerField(help_text="0: raw samples; 60 or 3600: rollups.")
    bucket_seconds = serializers.IntegerField()
    points = SeriesPointSerializer(many=True)
    figure = serializers.DictField(help_text="The Plotly figure (data and layout).")


class StarvingSerializer(serializers.Serializer):
    account = serializers.CharField(help_text="The worst-treated account when the episode opened.")
    since = serializers.DateTimeField(source="started_at")
    jain = serializers.FloatField(help_text="Jain's index when it opened.")
    worst_ratio = serializers.FloatField(help_text="That account's mean slowdown over all jobs' mean then.")
    switch = serializers.IntegerField(
        source="switch_id",
        allow_null=True,
        help_text="The simulation replaying another policy (/api/v1/simulations/{id}/).",
    )


class FairnessSerializer(serializers.Serializer):
    window_hours = serializers.FloatField()
    jobs = serializers.IntegerField(help_text="GPU jobs that ended in the window.")
    jain = serializers.FloatField(help_text="Jain's index over the accounts' mean bounded slowdowns (1: alike).")
    worst_account = serializers.CharField(allow_null=True)
    worst_ratio = serializers.FloatField(help_text="The worst account's mean slowdown over all jobs' mean.")
    accounts = serializers.DictField(child=serializers.FloatField(), help_text="Each account's mean bounded slowdown.")
    level = serializers.FloatField(help_text="FAIRNESS_WATCH_BELOW: staff are told below it (0: the watch is off).")
    starving = StarvingSerializer(allow_null=True, help_text="The episode under way, if any.")


class ProcessFindingQuerySerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=["open", "all"], default="open", help_text="open (default): those still keeping their GPU from jobs."
    )
    node = serializers.CharField(required=False, max_length=200, help_text="Only this node's.")


class ProcessFindingSerializer(serializers.ModelSerializer):
    """A finding of the GPU process audit: the process, its owner, the rule it broke."""

    node = serializers.CharField(source="gpu.node.name", read_only=True)
    gpu = serializers.IntegerField(source="gpu.index", read_only=True, help_text="The GPU's index on its node.")
    job = serializers.IntegerField(source="job_id", read_only=True, allow_null=True)

    class Meta:
        model = ProcessFinding
        fields = [
            "id",
            "node",
            "gpu",
            "rule",
            "pid",
            "uid",
            "user",
            "command",
            "used_memory_mib",
            "job",
            "reason",
            "first_seen_at",
            "last_seen_at",
            "cleared_at",
        ]
        read_only_fields = fields
