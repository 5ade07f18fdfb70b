"""Simulator runs (``scheduler.simulations``): ``POST /api/v1/accounts/{id}/preview/``
asks for a preview of a change to an account (202, run as a Celery task), ``GET
/api/v1/simulations/{id}/`` reads how far a run got and, when done, its figures. Staff
only: they are the ones who change shares and quotas."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.strict import RejectUnknownFields
from people.limits import PREVIEW_LIMITS
from people.models import Account
from scheduler.models import Simulation
from scheduler.previews import WINDOWS
from scheduler.simulations import start_preview


class PreviewRequestSerializer(RejectUnknownFields, serializers.Serializer):
    days = serializers.ChoiceField(choices=list(WINDOWS), default=7, help_text="How many days of history to replay.")
    shares = serializers.IntegerField(
        min_value=0, max_value=1_000_000, required=False, allow_null=True, help_text="The account's shares to try."
    )
    limits = serializers.DictField(
        child=serializers.IntegerField(min_value=0, max_value=2**31 - 1, allow_null=True),
        required=False,
        allow_null=True,
        help_text=f"Quota fields to try ({', '.join(PREVIEW_LIMITS)}), null for no limit; the rest stay.",
    )

    def validate_limits(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = sorted(set(value or {}) - set(PREVIEW_LIMITS))
        if unknown:
            raise serializers.ValidationError(f"Unknown quota fields {unknown}; known: {', '.join(PREVIEW_LIMITS)}.")
        return value or None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("shares") is None and not attrs.get("limits"):
            raise serializers.ValidationError({"shares": "Propose new shares or quota limits to preview."})
        return attrs


class SimulationSerializer(serializers.ModelSerializer):
    account = serializers.CharField(source="account.name", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Simulation
        fields = [
            "id",
            "kind",
            "account",
            "days",
            "params",
            "trace_name",
            "state",
            "progress",
            "result",
            "error",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields


class AccountPreviewStart(APIView):
    """Ask for a preview of a change to this account; poll ``/api/v1/simulations/{id}/``."""

    permission_classes = [IsAdminUser]

    @extend_schema(request=PreviewRequestSerializer, responses={202: SimulationSerializer})
    def post(self, request: Request, account_id: int) -> Response:
        account = get_object_or_404(Account, pk=account_id)
        body = PreviewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        row = start_preview(
            request.user, account, days=data["days"], shares=data.get("shares"), limits=data.get("limits")
        )
        row.refresh_from_db()  # inline runs have finished already
        return Response(SimulationSerializer(row).data, status=202)


class SimulationViewSet(viewsets.ReadOnlyModelViewSet):
    """Previews and replays asked for, newest first, with their state, progress and figures."""

    queryset = Simulation.objects.select_related("account").defer("trace")
    serializer_class = SimulationSerializer
    permission_classes = [IsAdminUser]
