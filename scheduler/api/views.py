"""Scheduler API: jobs (and their verbs), nodes, GPUs, clusters, start backtests.

Querysets come from ``people.access`` so a job someone may not see is a 404; verbs are
``@action``s that call ``scheduler.jobs.verbs``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet
from django.http import StreamingHttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.errors import Conflict
from common.api.schema import ErrorSerializer
from people.access import member_account_ids, visible_jobs
from people.models import Account
from scheduler.api import logs
from scheduler.api.advice import AdviceSerializer, advice_response
from scheduler.api.filters import GpuFilter, JobFilter, NodeFilter, NullsLastOrdering
from scheduler.api.job_edit import JobEditSerializer, validate_edit
from scheduler.api.serializers import (
    ClusterSerializer,
    DrainSerializer,
    GpuSerializer,
    JobEventSerializer,
    JobLogSerializer,
    JobSerializer,
    JobSubmitSerializer,
    NodeSerializer,
    PriorityBreakdownSerializer,
    ShareRowSerializer,
    StartBacktestSerializer,
    StartEstimateSerializer,
    WhatIfSerializer,
)
from scheduler.api.throttles import SubmitThrottle, WhatIfThrottle
from scheduler.backends import BackendError
from scheduler.choices import JobState
from scheduler.clusters.nodes import drain_node, resume_node
from scheduler.clusters.poll import poll_cluster
from scheduler.jobs import verbs
from scheduler.jobs.edit import edit_job
from scheduler.models import Cluster, Gpu, Job, Node, StartBacktest
from scheduler.reads import reports
from scheduler.reads.advice import job_shape
from scheduler.reads.arrays import collapse_pending, without_folded_tasks
from scheduler.tick import estimates


class JobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Submit, list and inspect jobs; cancel, hold, release and requeue them."""

    queryset = Job.objects.none()  # the real one is per user, see get_queryset
    permission_classes = [IsAuthenticated]
    filterset_class = JobFilter
    ordering_fields = [
        "id",
        "submitted_at",
        "started_at",
        "ended_at",
        "state",
        "name",
        "walltime_seconds",
        "gpu_utilization",
    ]
    nulls_last_fields = ["gpu_utilization"]
    filter_backends = [DjangoFilterBackend, NullsLastOrdering]
    ordering = ["-id"]

    def get_queryset(self) -> QuerySet[Job]:
        base = Job.objects.select_related("owner", "account", "qos", "cluster", "efficiency")
        if self.action != "list":
            # One job's file names and whether they expired; never the content (up to
            # JOB_FILES_MAX_BYTES), nor anything of them in lists.
            base = base.select_related("file_set").defer("file_set__files")
        # A finished job's mean GPU utilization (monitoring's efficiency), to sort by.
        return visible_jobs(self.request.user, base).annotate(gpu_utilization=F("efficiency__gpu_util_mean"))

    def get_throttles(self) -> list[Any]:
        """Submissions count against ``JOB_SUBMIT_RATE`` (``SubmitThrottle``)."""
        return [SubmitThrottle()] if self.action == "create" else super().get_throttles()

    def get_serializer_class(self) -> type:
        return JobSubmitSerializer if self.action in ("create", "estimate") else JobSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "collapse",
                str,
                enum=["arrays"],
                description="arrays: each job array's waiting tasks as one row (display_id 42_[8-999], "
                "folded_tasks their number), as squeue shows them; started tasks keep a row each.",
            )
        ]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        collapse = request.query_params.get("collapse", "")
        if collapse not in ("", "arrays"):
            raise ValidationError({"collapse": "Must be 'arrays' (or left out)."})
        jobs = self.filter_queryset(self.get_queryset())
        if collapse:
            jobs = without_folded_tasks(jobs)
        page = self.paginate_queryset(jobs)
        rows = page if page is not None else list(jobs)
        folded = collapse_pending((j.id, j.array_job_id, j.state) for j in rows) if collapse else {}
        context = {**self.get_serializer_context(), "folded": folded, "listing": True}
        data = JobSerializer(rows, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(
        request=JobSubmitSerializer,
        responses={201: JobSerializer, 429: ErrorSerializer},
        description="Submit a job, or a job array (one submission however many tasks). Each user may submit "
        "JOB_SUBMIT_RATE times (default 60 a minute); beyond that the answer is 429 with Retry-After. The files "
        "are stored once per submission, and one user's stored files may hold JOB_FILES_MAX_BYTES_PER_USER bytes "
        "until they expire, JOB_FILES_RETENTION_DAYS after their jobs end.",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = JobSubmitSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        job = serializer.save()
        return Response(JobSerializer(job, context={"just_submitted": True}).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=JobEditSerializer,
        responses={200: JobSerializer, 400: None, 409: ErrorSerializer},
        description="Change a PENDING or HELD job (``scontrol update``): name, walltime (staff may raise it; "
        "others only lower it), qos, nice, dependencies, node_labels, gpu_model. Validated as a submission; "
        "409 once the job has started. Recorded in its events.",
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        job = self.get_object()
        changes = validate_edit(job, request.data, request.user)
        edit_job(job, changes, by=request.user.get_username())
        job.refresh_from_db()
        return Response(JobSerializer(job).data)

    def _verb(self, request: Request, verb: str) -> Response:
        job = self.get_object()
        getattr(verbs, f"{verb}_job")(job, by=request.user.get_username())
        job.refresh_from_db()
        return Response(JobSerializer(job).data)

    @extend_schema(request=None, responses={200: JobSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return self._verb(request, "cancel")

    @extend_schema(request=None, responses={200: JobSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str | None = None) -> Response:
        return self._verb(request, "hold")

    @extend_schema(request=None, responses={200: JobSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        return self._verb(request, "release")

    @extend_schema(request=None, responses={200: JobSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, pk: str | None = None) -> Response:
        return self._verb(request, "requeue")

    @extend_schema(responses={200: JobEventSerializer(many=True)}, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[])
    def events(self, request: Request, pk: str | None = None) -> Response:
        """The job's audit trail, oldest first."""
        job = self.get_object()
        page = self.paginate_queryset(job.events.order_by("id"))
        return self.get_paginated_response(JobEventSerializer(page, many=True).data)

    @extend_schema(
        responses={200: JobLogSerializer, 409: ErrorSerializer, 503: ErrorSerializer},
        parameters=[
            OpenApiParameter(
                "max_bytes", int, description="Tail length, or with offset the most to read (1..1048576; 65536)."
            ),
            logs.OFFSET_PARAMETER,
            logs.RANK_PARAMETER,
            logs.STREAM_PARAMETER,
        ],
        filters=False,
        description="The tail of the job's log, every rank's output together (the quick view). With offset: one "
        "log (rank, stream) from that byte on, at most max_bytes, ending on a whole character, with next_offset "
        "to ask from next: a client follows a running job's log by asking again from next_offset until ended is "
        "true and nothing new comes. Who may see the job may read its log; others get 404.",
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def log(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        if "offset" in request.query_params:
            return logs.part_answer(job, request.query_params)
        return logs.tail_answer(job, request.query_params)

    @extend_schema(
        responses={
            (200, "text/plain"): OpenApiTypes.BINARY,
            409: ErrorSerializer,
            503: ErrorSerializer,
        },
        parameters=[logs.RANK_PARAMETER, logs.STREAM_PARAMETER, logs.OFFSET_PARAMETER],
        filters=False,
        description="One log whole (rank, stream; from offset if given), byte for byte as the job wrote it, "
        "streamed as an attachment (job-42-rank1-stderr.log). A running job's log as far as it is written.",
    )
    @action(
        detail=True,
        methods=["get"],
        filter_backends=[],
        url_path="log/download",
        renderer_classes=[JSONRenderer],
        content_negotiation_class=logs.JsonWhateverAccepted,
    )
    def log_download(self, request: Request, pk: str | None = None) -> StreamingHttpResponse:
        return logs.download_answer(self.get_object(), request.query_params)

    @extend_schema(
        responses={200: StartEstimateSerializer(many=True)},
        filters=False,
        description="Latest expected starts of your pending jobs (the account's, for coordinators), like "
        "`squeue --start`, as of the last estimate pass (every `SCHEDULER_ESTIMATE_SECONDS`). Jobs waiting on a "
        "dependency, a quota or down hardware, and jobs submitted since the last pass, have none.",
    )
    @action(detail=False, methods=["get"], filter_backends=[], pagination_class=None)
    def estimates(self, request: Request) -> Response:
        """Estimated starts of your pending jobs (the account's, for coordinators), like
        ``squeue --start``; jobs waiting on a dependency, a quota or down hardware have none.

        Reads the estimates the periodic pass stored (``scheduler.tick.estimates.refresh_estimates``,
        every ``SCHEDULER_ESTIMATE_SECONDS``) rather than planning the queue here: planning
        is the cost of a tick and more, too much to pay on every request from every
        user, and Slurm's ``squeue --start`` likewise shows what its backfill pass last
        computed. A job submitted since the last pass has no estimate yet; ask
        ``POST /api/v1/jobs/estimate/`` before submitting for one at once.
        """
        rows = (
            self.get_queryset()
            .filter(state=JobState.PENDING, estimated_start_at__isnull=False)
            .order_by("id")
            .values_list("id", "estimated_start_at")
        )
        data = [{"job": job_id, "estimated_start": at} for job_id, at in rows]
        return Response(StartEstimateSerializer(data, many=True).data)

    @extend_schema(request=JobSubmitSerializer, responses={200: WhatIfSerializer, 429: ErrorSerializer}, filters=False)
    @action(
        detail=False, methods=["post"], filter_backends=[], pagination_class=None, throttle_classes=[WhatIfThrottle]
    )
    def estimate(self, request: Request) -> Response:
        """If you submitted this job now, when would it start? Takes exactly a submission's
        body, with the same validation and permissions (the same 400s); answers with the
        latest expected start, why it would wait and its priority. Nothing is submitted
        or stored. Each user may ask ``SCHEDULER_WHATIF_RATE`` times (default 30 a
        minute); beyond that the answer is 429 with ``Retry-After``."""
        serializer = JobSubmitSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        answer = estimates.what_if(owner=request.user, **serializer.validated_data)
        return Response(WhatIfSerializer(answer).data)

    @extend_schema(responses={200: AdviceSerializer, 403: ErrorSerializer}, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def advice(self, request: Request, pk: str | None = None) -> Response:
        """Right-sizing advice for requests like this job's, from its owner's ended jobs of
        the same shape (see ``GET /api/v1/advice/``). Only the job's owner reads it: it
        speaks of their jobs; anyone else who may see the job gets 403."""
        job = self.get_object()
        if job.owner_id != request.user.pk:
            raise PermissionDenied("Right-sizing advice is for the job's owner alone.")
        return advice_response(job.owner_id, job_shape(job))

    @extend_schema(responses={200: PriorityBreakdownSerializer, 409: None}, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[])
    def priority(self, request: Request, pk: str | None = None) -> Response:
        """Why a pending job has the priority it has (``sprio``): each weighted factor."""
        job = self.get_object()
        if job.state != JobState.PENDING:
            raise Conflict(f"Job {job.id} is {job.state}; only pending jobs have a priority.")
        breakdown = reports.priority_of(job)
        if breakdown is None:
            raise Conflict("The queue is ordered by submit time (SCHEDULER_PRIORITY=fifo); there are no factors.")
        return Response(PriorityBreakdownSerializer(breakdown).data)


class FairShareView(APIView):
    """The fair-share tree (``sshare -l``). Staff see every row; others the rows of the
    accounts they belong to."""

    @extend_schema(responses={200: ShareRowSerializer(many=True)})
    def get(self, request: Request) -> Response:
        rows = reports.fairshare_report()
        if not request.user.is_staff:
            mine = set(Account.objects.filter(pk__in=member_account_ids(request.user)).values_list("name", flat=True))
            rows = [row for row in rows if row.account in mine]
        return Response(ShareRowSerializer(rows, many=True).data)


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """Nodes with their GPUs; admins may drain and resume them."""

    queryset = Node.objects.select_related("cluster").prefetch_related("gpus__parent")
    serializer_class = NodeSerializer
    filterset_class = NodeFilter
    ordering_fields = ["name", "state", "cpus", "memory_mib", "last_heartbeat"]
    ordering = ["name"]

    @extend_schema(request=DrainSerializer, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser])
    def drain(self, request: Request, pk: str | None = None) -> Response:
        node = self.get_object()
        body = DrainSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        drain_node(node, reason=body.validated_data["reason"], by=request.user)
        return Response(NodeSerializer(self.get_queryset().get(pk=node.pk)).data)

    @extend_schema(request=None, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        node = self.get_object()
        resume_node(node, by=request.user)
        return Response(NodeSerializer(self.get_queryset().get(pk=node.pk)).data)


class GpuViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Gpu.objects.select_related("node", "parent")
    serializer_class = GpuSerializer
    filterset_class = GpuFilter
    ordering_fields = ["node__name", "index", "model", "memory_mib"]
    ordering = ["node__name", "index"]


class ClusterViewSet(viewsets.ModelViewSet):
    """Admins register clusters; the config is validated by building the backend."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    permission_classes = [IsAdminUser]
    filterset_fields = ["kind", "enabled"]
    ordering_fields = ["name", "kind", "created_at"]
    ordering = ["name"]

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"])
    def sync(self, request: Request, pk: str | None = None) -> Response:
        cluster = self.get_object()
        try:
            return Response(poll_cluster(cluster))
        except BackendError as exc:
            raise ValidationError({"config": exc.message}) from None


class StartBacktestViewSet(viewsets.ReadOnlyModelViewSet):
    """Staff read how well the p50 and p90 starts came true: each run of the periodic
    backtest, newest first (``scheduler.backtests``)."""

    queryset = StartBacktest.objects.all()
    serializer_class = StartBacktestSerializer
    permission_classes = [IsAdminUser]
    filter_backends: list[Any] = []
