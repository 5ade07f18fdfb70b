"""Shapes of the monitoring API, for the schema. Ingest validates by hand
(``monitoring.ingest``) for speed; these document the same fields."""

from __future__ import annotations

from rest_framework import serializers

from monitoring.series import METRICS


class ProcessSerializer(serializers.Serializer):
    pid = serializers.IntegerField()
    used_memory_mib = serializers.IntegerField(required=False)


class SampleSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When it was read, with a time zone.")
    index = serializers.IntegerField(required=False, min_value=0, help_text="The GPU's index on the node.")
    uuid = serializers.CharField(required=False, max_length=64, help_text="The GPU's UUID; preferred over index.")
    utilization_pct = serializers.FloatField(
        min_value=0, max_value=100, allow_null=True, required=False, help_text="null or absent: not reported (MIG)."
    )
    memory_used_mib = serializers.IntegerField(min_value=0)
    memory_total_mib = serializers.IntegerField(required=False, min_value=0)
    temperature_c = serializers.FloatField(required=False)
    power_w = serializers.FloatField(required=False, min_value=0)
    power_limit_w = serializers.FloatField(required=False, min_value=0)
    sm_clock_mhz = serializers.IntegerField(required=False, min_value=0)
    throttle_reasons = serializers.ListField(child=serializers.CharField(max_length=32), required=False)
    xid = serializers.IntegerField(required=False, min_value=0, help_text="An XID error seen since the last sample.")
    ecc_errors = serializers.IntegerField(required=False, min_value=0)
    processes = ProcessSerializer(many=True, required=False)


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
