"""``GET /api/v1/usage/``: GPU-hours over a period by account, user, GPU model or QOS,
raw and billing-weighted (``scheduler.reads.usage``), as JSON or CSV (``output=csv``).

Who sees what: staff every job; others their own jobs and those of the accounts they
coordinate, as with the job list. ``account`` narrows to that account and its subtree,
``user`` to one owner.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.strict import RejectUnknownFields
from people.models import Account
from scheduler.reads.usage import GROUPS, attempts_in, day_span, usage, usage_period, usage_scope


class UsageQuery(RejectUnknownFields, serializers.Serializer):
    start = serializers.DateField(required=False, help_text="First day (UTC); default: 30 days before end.")
    end = serializers.DateField(required=False, help_text="Last day, included (UTC); default: today.")
    group_by = serializers.ChoiceField(choices=list(GROUPS), default="account")
    account = serializers.SlugRelatedField(
        slug_field="name", queryset=Account.objects.all(), required=False, help_text="With its subtree."
    )
    user = serializers.CharField(required=False, max_length=150)
    output = serializers.ChoiceField(choices=["json", "csv"], default="json")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            start, end = usage_period(attrs.get("start"), attrs.get("end"))
        except ValueError as exc:
            raise serializers.ValidationError({"start": str(exc)}) from None
        return {**attrs, "start": start, "end": end}


class UsageRowSerializer(serializers.Serializer):
    group = serializers.CharField()
    attempts = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    billed_gpu_hours = serializers.FloatField()
    used_gpu_hours = serializers.FloatField(help_text="Measured GPU-hours times their GPUs' mean utilization.")
    idle_gpu_hours = serializers.FloatField(help_text="Measured GPU-hours not used.")
    unmeasured_gpu_hours = serializers.FloatField(help_text="GPU-hours without samples (never counted as 0% or 100%).")
    efficiency_pct = serializers.FloatField(allow_null=True, help_text="Used of measured, %; null: nothing measured.")


class UsageSerializer(serializers.Serializer):
    start = serializers.DateField()
    end = serializers.DateField()
    group_by = serializers.ChoiceField(choices=list(GROUPS))
    rows = UsageRowSerializer(many=True)


class UsageView(APIView):
    """GPU-hours over a period (``sreport``): each attempt's overlap with the period times
    its GPUs, summed by ``group_by``; ``billed_gpu_hours`` weighs them as the fair-share
    does (GPU model billing weight x QOS usage factor)."""

    @extend_schema(
        parameters=[UsageQuery],
        responses={
            (200, "application/json"): UsageSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request) -> Any:
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        scope = usage_scope(request.user, params.get("account"), params.get("user", ""))
        start, end = day_span(params["start"], params["end"])
        now = datetime.now(UTC)
        rows = usage(attempts_in(start, end, min(now, end), scope), start, end, params["group_by"])
        if params["output"] == "csv":
            return _csv(rows, params["group_by"], params["start"], params["end"])
        return Response(
            UsageSerializer(
                {"start": params["start"], "end": params["end"], "group_by": params["group_by"], "rows": rows}
            ).data
        )


def _csv(rows: list[Any], group_by: str, start: date, end: date) -> HttpResponse:
    out = io.StringIO()
    writer = csv.writer(out)
    hours = ("gpu_hours", "billed_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours")
    writer.writerow([group_by, "attempts", *hours, "efficiency_pct"])
    for row in rows:
        efficiency = "" if row.efficiency_pct is None else f"{row.efficiency_pct:.2f}"
        writer.writerow([row.group, row.attempts, *(f"{getattr(row, name):.6f}" for name in hours), efficiency])
    response = HttpResponse(out.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="gpu-hours-{start}-{end}.csv"'
    return response
