"""The monitoring API: node agents post samples; staff read series for charts and the
GPU process audit's findings."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics, status
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from monitoring import services
from monitoring.api.auth import IsNodeAgent, NodeTokenAuthentication
from monitoring.api.serializers import (
    FairnessSerializer,
    IngestResultSerializer,
    ProcessFindingQuerySerializer,
    ProcessFindingSerializer,
    SampleBatchSerializer,
    SeriesQuerySerializer,
    SeriesSerializer,
)
from monitoring.fairness import open_episode
from monitoring.models import NodeToken, ProcessFinding
from monitoring.series import series
from scheduler.models import Gpu
from scheduler.reads.fairness import WINDOW, read_fairness


class SampleIngestView(APIView):
    """``POST /api/v1/monitoring/samples/``: one node's batch of GPU samples."""

    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]

    @extend_schema(
        request=SampleBatchSerializer,
        responses={200: IngestResultSerializer, 400: IngestResultSerializer},
        summary="Post a batch of GPU samples (node token)",
        description=(
            "Invalid samples are rejected with their position and errors; the rest are stored. "
            "Idempotent on (GPU, at). 400 if no sample was valid; 403 if the batch names another node "
            "or another node's GPU."
        ),
    )
    def post(self, request: Request) -> Response:
        from django.conf import settings

        token = request.auth
        assert isinstance(token, NodeToken)  # IsNodeAgent
        node = token.node
        body = request.data
        if not isinstance(body, dict) or not isinstance(body.get("samples"), list):
            raise exceptions.ValidationError({"samples": "Expected an object with a 'samples' list."})
        if body.get("node") not in (None, node.name):
            raise exceptions.PermissionDenied(f"This token belongs to node {node.name}, not {body['node']}.")
        samples = body["samples"]
        if len(samples) > settings.MONITORING_MAX_BATCH:
            raise exceptions.ValidationError(
                {"samples": f"At most {settings.MONITORING_MAX_BATCH} samples per request; got {len(samples)}."}
            )
        try:
            result = services.ingest_batch(node, samples)
        except services.ForeignGpu as exc:
            raise exceptions.PermissionDenied(str(exc)) from exc
        failed = result.received > 0 and result.accepted == 0
        return Response(asdict(result), status=status.HTTP_400_BAD_REQUEST if failed else status.HTTP_200_OK)


class SeriesView(APIView):
    """``GET /api/v1/monitoring/series/``: one metric of some GPUs as a min/mean/max band.

    Staff only: any GPU's series shows what other accounts' jobs do. Researchers see
    their own jobs' GPUs on the job page, which checks who may see the job.
    """

    permission_classes = [IsAdminUser]

    @extend_schema(parameters=[SeriesQuerySerializer], responses=SeriesSerializer, summary="GPU metric series")
    def get(self, request: Request) -> Response:
        query = SeriesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        gpus = Gpu.objects.all()
        if params.get("gpus"):
            try:
                ids = [int(x) for x in params["gpus"].split(",") if x.strip()]
            except ValueError:
                raise exceptions.ValidationError({"gpus": "Comma-separated GPU ids."}) from None
            gpus = gpus.filter(pk__in=ids)
        if params.get("node"):
            gpus = gpus.filter(node__name=params["node"])
        end = params.get("end") or timezone.now()
        try:
            result = series(gpus.values("id"), params["start"], end, params["metric"])
        except ValueError as exc:
            raise exceptions.ValidationError({"end": str(exc)}) from exc
        from monitoring import charts  # plotly takes ~0.2 s to import: only when a chart is asked for

        payload = asdict(result) | {"figure": charts.band_figure(result)}
        return Response(SeriesSerializer(payload).data)


class FairnessView(APIView):
    """``GET /api/v1/monitoring/fairness/``: the fairness watch's figures over the last
    24 h (as the cluster overview shows them) and the starvation episode under way.

    Staff only: it compares every account's waits.
    """

    permission_classes = [IsAdminUser]

    @extend_schema(responses=FairnessSerializer, summary="Fairness over the last 24 h")
    def get(self, request: Request) -> Response:
        fairness = read_fairness(timezone.now())
        payload = asdict(fairness) | {
            "window_hours": WINDOW.total_seconds() / 3600,
            "level": settings.FAIRNESS_WATCH_BELOW,
            "starving": open_episode(),
        }
        return Response(FairnessSerializer(payload).data)


class ProcessFindingList(generics.ListAPIView):
    """``GET /api/v1/monitoring/process-findings/``: the GPU process audit's findings
    (``monitoring.audit``), open ones by default, newest first.

    Staff only: a finding names another user's process and job.
    """

    serializer_class = ProcessFindingSerializer
    permission_classes = [IsAdminUser]

    @extend_schema(parameters=[ProcessFindingQuerySerializer], summary="GPU process audit findings")
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        query = ProcessFindingQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        findings = ProcessFinding.objects.select_related("gpu__node").order_by("-first_seen_at", "-id")
        if query.validated_data["state"] == "open":
            findings = findings.filter(cleared_at__isnull=True)
        if query.validated_data.get("node"):
            findings = findings.filter(gpu__node__name=query.validated_data["node"])
        return findings
