"""Right-sizing advice (``scheduler.advice``): ``GET /api/v1/advice/?gpus=8&walltime_seconds=43200``
for a shape you are about to ask for, and ``GET /api/v1/jobs/{id}/advice/`` for a job's.

Advice speaks of one person's jobs ("your last 20 jobs"): each user reads only their own.
A coordinator or staff member who may see someone's job is refused its advice (403).
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.strict import RejectUnknownFields
from scheduler.advice import advise
from scheduler.models import Cluster
from scheduler.reads.advice import Shape, advice_payload, shape_of


class AdviceQuery(RejectUnknownFields, serializers.Serializer):
    gpus = serializers.IntegerField(min_value=1, max_value=100_000, help_text="GPUs in all (nodes x GPUs per node).")
    walltime_seconds = serializers.IntegerField(min_value=1, max_value=10 * 365 * 86400)
    gpu_model = serializers.CharField(required=False, default="", allow_blank=True, max_length=256)
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), required=False, help_text="Default: any cluster."
    )


class RightSizeSerializer(serializers.Serializer):
    words = serializers.CharField(help_text="The advice as a sentence.")
    jobs = serializers.IntegerField(help_text="Your ended jobs of this shape it read (the last 20 at most).")
    walltime_used = serializers.FloatField(help_text="Their mean elapsed time over walltime, 0-1.")
    gpus_asked = serializers.IntegerField()
    gpus_used = serializers.IntegerField(allow_null=True, help_text="The most GPUs one kept busy; null: unmeasured.")
    walltime_asked_seconds = serializers.IntegerField()
    suggested_walltime_seconds = serializers.IntegerField()
    suggested_gpus = serializers.IntegerField()
    started_sooner_seconds = serializers.FloatField(
        allow_null=True,
        help_text="How much sooner, on average, the suggestion would have started them in a replay of the "
        "site's history; null: it asks for no less, or the replay is pending.",
    )
    replayed_days = serializers.FloatField(
        allow_null=True,
        help_text="The days of the site's history the replay covered: from a day before the first of these "
        "jobs to now, at most ADVICE_DAYS; null: no replay (yet).",
    )
    pending = serializers.BooleanField(
        help_text="The replay that measures started_sooner_seconds is under way: ask again shortly."
    )


class AdviceSerializer(serializers.Serializer):
    advice = RightSizeSerializer(allow_null=True, help_text="Null: fewer than min_jobs ended jobs of this shape.")
    min_jobs = serializers.IntegerField()


def advice_response(owner_id: int, shape: Shape) -> Response:
    """The advice for ``owner_id``'s requests of ``shape`` (computed once, then cached)."""
    found = advise(owner_id, shape, timezone.now())
    return Response(AdviceSerializer(advice_payload(found, settings.ADVICE_MIN_JOBS)).data)


class AdviceView(APIView):
    """Right-sizing advice for the request you describe, from your own ended jobs of that
    shape: what they used of their walltime and GPUs, the smaller request that fits
    them, and how much sooner it would have started them on the site's history. Never
    given on fewer than ``ADVICE_MIN_JOBS`` jobs."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[AdviceQuery], responses={200: AdviceSerializer})
    def get(self, request: Request) -> Any:
        query = AdviceQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        cluster = params.get("cluster")
        shape = shape_of(
            params["gpus"], params["walltime_seconds"], params["gpu_model"], cluster.id if cluster else None
        )
        return advice_response(cast(int, request.user.pk), shape)
