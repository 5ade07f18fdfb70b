"""``/api/v1/arrays/{id}/``: a job array as a whole (``scancel 42``, ``scontrol hold 42``).

The id is the array's (its first task's job id). Each task is also a job of its own at
``/api/v1/jobs/{id}/``; ``GET /api/v1/jobs/?array_job=42`` lists them. Who may see the
array's tasks may act on it, as for one job; for anyone else it does not exist (404).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.schema import ErrorSerializer
from common.api.strict import RejectUnknownFields
from people.access import visible_jobs
from scheduler.jobs.array_verbs import ARRAY_VERBS, set_throttle
from scheduler.models import Job
from scheduler.reads.arrays import array_summary


class ArraySerializer(serializers.Serializer):
    """One job array: its spec and throttle, its tasks counted by state."""

    array_job = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField()
    account = serializers.CharField()
    spec = serializers.CharField(help_text="The indices as submitted, e.g. 0-999%50.")
    task_count = serializers.IntegerField()
    throttle = serializers.IntegerField(help_text="Tasks that may run at once; 0: no limit.")
    states = serializers.DictField(child=serializers.IntegerField(), help_text="State -> tasks in it.")
    pending = serializers.CharField(allow_blank=True, help_text="The waiting tasks, e.g. 42_[8-999].")


class ArrayVerbSerializer(serializers.Serializer):
    array_job = serializers.IntegerField()
    changed = serializers.IntegerField(help_text="Tasks the verb moved.")
    array = ArraySerializer()


class ThrottleSerializer(RejectUnknownFields, serializers.Serializer):
    throttle = serializers.IntegerField(
        min_value=0, max_value=1_000_000, help_text="Tasks that may run at once (scontrol update ArrayTaskThrottle)."
    )


@extend_schema(
    parameters=[
        OpenApiParameter("id", int, OpenApiParameter.PATH, description="The array's id (its first task's job id).")
    ]
)
class ArrayViewSet(viewsets.ViewSet):
    """Inspect, throttle, cancel, hold, release and requeue a whole job array."""

    permission_classes = [IsAuthenticated]

    def _tasks(self, request: Request, pk: str | None) -> tuple[int, QuerySet[Job]]:
        text = pk or ""
        if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 2**63:  # "¹".isdigit() too
            raise NotFound("No such job array.")
        array_job = int(text)
        tasks = visible_jobs(request.user, Job.objects.filter(array_job_id=array_job))
        if not tasks.exists():
            raise NotFound("No such job array.")
        return array_job, tasks

    def _summary(self, tasks: QuerySet[Job], array_job: int) -> dict[str, Any]:
        return dict(ArraySerializer(array_summary(tasks, array_job)).data)

    @extend_schema(responses={200: ArraySerializer})
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        array_job, tasks = self._tasks(request, pk)
        return Response(self._summary(tasks, array_job))

    @extend_schema(request=ThrottleSerializer, responses={200: ArraySerializer})
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change how many tasks may run at once (``scontrol update JobId=42
        ArrayTaskThrottle=10``); 0 lifts the limit. Running tasks beyond it run on."""
        array_job, tasks = self._tasks(request, pk)
        body = ThrottleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        set_throttle(tasks, body.validated_data["throttle"])
        return Response(self._summary(tasks, array_job))

    def _verb(self, request: Request, pk: str | None, verb: str) -> Response:
        array_job, tasks = self._tasks(request, pk)
        changed = ARRAY_VERBS[verb](tasks, array_job, by=request.user.get_username())
        return Response({"array_job": array_job, "changed": changed, "array": self._summary(tasks, array_job)})

    @extend_schema(request=None, responses={200: ArrayVerbSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel every waiting and running task (``scancel 42``)."""
        return self._verb(request, pk, "cancel")

    @extend_schema(request=None, responses={200: ArrayVerbSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str | None = None) -> Response:
        """Hold every waiting task (``scontrol hold 42``)."""
        return self._verb(request, pk, "hold")

    @extend_schema(request=None, responses={200: ArrayVerbSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        """Release every held task (``scontrol release 42``)."""
        return self._verb(request, pk, "release")

    @extend_schema(request=None, responses={200: ArrayVerbSerializer, 409: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, pk: str | None = None) -> Response:
        """Requeue every running and ended task as a new attempt (``scontrol requeue 42``)."""
        return self._verb(request, pk, "requeue")
