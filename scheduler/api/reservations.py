"""``/api/v1/reservations/``: reservations and maintenance windows (``scontrol create
reservation``). Everyone signed in reads them (they decide where jobs may run); staff
create, change and delete them (``scheduler.clusters.reservations``: audited, and made in
Slurm too), and ask what one would cost the queue before it is made or changed
(``POST .../preview-cost/``: ``scheduler.reads.reservations.preview_cost``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.fields import SlugRelatedField
from common.api.permissions import IsStaffOrReadOnly
from common.api.strict import RejectUnknownFields
from people.models import Account
from scheduler.clusters.reservations import delete_reservation, save_reservation
from scheduler.core.types import Window
from scheduler.models import Node, Reservation
from scheduler.reads.reservations import nodes_for_gpus, preview_cost, suggest_range_problems
from scheduler.tick.snapshot import as_window

#: The longest reservation one may make (Slurm has no bound; a typo in a year should not
#: take nodes away for a decade).
MAX_DAYS = 366


class ReservationSerializer(RejectUnknownFields, serializers.ModelSerializer):
    nodes = SlugRelatedField(
        slug_field="name",
        queryset=Node.objects.all(),
        many=True,
        required=False,
        help_text="The nodes; or leave them out and ask for gpus of a gpu_model.",
    )
    gpus = serializers.IntegerField(
        min_value=0, max_value=100_000, required=False, help_text="A number of GPUs of gpu_model, instead of nodes."
    )
    gpu_model = serializers.CharField(max_length=96, required=False, allow_blank=True)
    accounts = SlugRelatedField(slug_field="name", queryset=Account.objects.all(), many=True, required=False)
    users = SlugRelatedField(slug_field="username", queryset=get_user_model().objects.all(), many=True, required=False)
    active = serializers.SerializerMethodField(help_text="Whether it holds its nodes now.")

    class Meta:
        model = Reservation
        fields = [
            "id", "name", "kind", "start_at", "end_at", "nodes", "gpus", "gpu_model", "accounts", "users", "active",
            "created_at",
        ]  # fmt: skip
        read_only_fields = ["id", "active", "created_at"]

    def get_active(self, reservation: Reservation) -> bool:
        now = timezone.now()
        return reservation.start_at <= now < reservation.end_at

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        current = self.instance
        merged = {
            "kind": attrs.get("kind", current.kind if current else None),
            "start_at": attrs.get("start_at", current.start_at if current else None),
            "end_at": attrs.get("end_at", current.end_at if current else None),
            "nodes": attrs.get("nodes", list(current.nodes.all()) if current else []),
            "accounts": attrs.get("accounts", list(current.accounts.all()) if current else []),
            "users": attrs.get("users", list(current.users.all()) if current else []),
            "gpus": attrs.get("gpus", current.gpus if current else 0),
            "gpu_model": attrs.get("gpu_model", current.gpu_model if current else ""),
        }
        errors: dict[str, str] = {}
        by_gpus = "gpus" in attrs or "gpu_model" in attrs
        if by_gpus and "nodes" in attrs:
            errors["nodes"] = "Name the nodes, or ask for gpus of a gpu_model: not both."
        elif by_gpus and not (merged["gpus"] and merged["gpu_model"]):
            errors["gpus"] = "Ask for a number of GPUs (gpus) of one model (gpu_model)."
        elif by_gpus and merged["start_at"] and merged["end_at"] and merged["end_at"] > merged["start_at"]:
            try:
                merged["nodes"] = nodes_for_gpus(
                    merged["gpu_model"],
                    merged["gpus"],
                    merged["start_at"],
                    merged["end_at"],
                    keep=current.pk if current else None,
                )
            except ValueError as exc:
                errors["gpus"] = str(exc)
        elif "nodes" in attrs:
            merged["gpus"], merged["gpu_model"] = 0, ""  # named nodes now
        if merged["start_at"] and merged["end_at"]:
            if merged["end_at"] <= merged["start_at"]:
                errors["end_at"] = "Must be after start_at."
            elif (merged["end_at"] - merged["start_at"]).days >= MAX_DAYS:
                errors["end_at"] = f"At most {MAX_DAYS} days."
            elif merged["end_at"] <= timezone.now():
                errors["end_at"] = "Must be in the future."
        if not merged["nodes"] and "gpus" not in errors:
            errors["nodes"] = "Name at least one node (or ask for gpus of a gpu_model)."
        if merged["kind"] == Reservation.Kind.MAINTENANCE and (merged["accounts"] or merged["users"]):
            errors["accounts"] = "A maintenance window is for no one: leave accounts and users empty."
        if merged["kind"] == Reservation.Kind.ACCOUNTS and not (merged["accounts"] or merged["users"]):
            errors["accounts"] = "Name the accounts or users it is for."
        if errors:
            raise serializers.ValidationError(errors)
        return merged | {"name": attrs.get("name", current.name if current else "")}


def window_of(validated: dict[str, Any]) -> Window:
    """A reservation as :class:`ReservationSerializer` validated it (saved or not), as the
    core's window: what a cost preview plans with."""
    return as_window(
        validated["name"],
        validated["kind"],
        validated["start_at"],
        validated["end_at"],
        validated["nodes"],
        validated["accounts"],
        validated["users"],
    )


class SuggestRangeSerializer(RejectUnknownFields, serializers.Serializer):
    """The range a cost preview searches for the least displacing start (both or neither)."""

    suggest_from = serializers.DateTimeField(required=False, help_text="The earliest start you would accept.")
    suggest_until = serializers.DateTimeField(required=False, help_text="The latest start you would accept.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        problems = suggest_range_problems(attrs.get("suggest_from"), attrs.get("suggest_until"))
        if problems:
            raise serializers.ValidationError(problems)
        return attrs


class CostRequestSerializer(ReservationSerializer):
    """The body of a cost preview, for the schema: a reservation's body plus the range
    (:class:`SuggestRangeSerializer` validates the range, the reservation's serializer the rest)."""

    suggest_from = serializers.DateTimeField(required=False, help_text="The earliest start you would accept.")
    suggest_until = serializers.DateTimeField(
        required=False, help_text="The latest: the start between them that displaces least is suggested."
    )

    class Meta(ReservationSerializer.Meta):
        fields = [*ReservationSerializer.Meta.fields, "suggest_from", "suggest_until"]


class DelaySerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    gpus = serializers.FloatField(help_text="The GPUs it asks for.")
    planned_start = serializers.DateTimeField(source="before", help_text="Its planned start without the window.")
    planned_start_with_window = serializers.DateTimeField(
        source="after", allow_null=True, help_text="With it; null: never planned with it."
    )
    delay_seconds = serializers.FloatField(source="seconds", allow_null=True)
    gpu_hours = serializers.FloatField(help_text="Its GPUs times its delay in hours.")


class OverrunSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    gpus = serializers.FloatField(help_text="The GPUs it holds on the window's nodes.")
    walltime_ends_at = serializers.DateTimeField(source="until")
    gpu_hours = serializers.FloatField(help_text="Its GPUs times the hours of its run inside the window.")


class WindowCostSerializer(serializers.Serializer):
    """What a window at one start would do to the planned queue."""

    start_at = serializers.DateTimeField()
    end_at = serializers.DateTimeField()
    gpu_hours_displaced = serializers.FloatField(source="gpu_hours", help_text="queued_gpu_hours + running_gpu_hours.")
    queued_gpu_hours = serializers.FloatField(help_text="Delayed pending jobs: GPUs times delay in hours.")
    running_gpu_hours = serializers.FloatField(help_text="Running jobs on its nodes: GPUs times hours inside it.")
    unplanned_jobs = serializers.IntegerField(source="unplanned", help_text="Jobs planned without it, not with it.")
    delayed_jobs = DelaySerializer(source="delays", many=True, help_text="The longest delay first.")
    running_jobs = OverrunSerializer(source="overruns", many=True, help_text="Still running when it begins.")


class WindowStartSerializer(serializers.Serializer):
    best = WindowCostSerializer(help_text="The start that displaces least (ties: the earliest).")
    tried = serializers.SerializerMethodField(help_text="How many starts were planned.")

    def get_tried(self, suggestion: Any) -> int:
        return len(suggestion.tried)


class CostPreviewSerializer(serializers.Serializer):
    cost = WindowCostSerializer()
    suggestion = WindowStartSerializer(allow_null=True, help_text="Null unless a range was given.")


RANGE_FIELDS = ("suggest_from", "suggest_until")


class ReservationViewSet(viewsets.ModelViewSet):
    """Reservations and maintenance windows; ``?active=1`` for those not yet ended."""

    serializer_class = ReservationSerializer
    permission_classes = [IsStaffOrReadOnly]
    ordering = ["start_at", "name"]

    def get_queryset(self) -> QuerySet[Reservation]:
        reservations = Reservation.objects.prefetch_related("nodes", "accounts", "users")
        if self.request.query_params.get("active") in ("1", "true"):
            reservations = reservations.filter(end_at__gt=timezone.now())
        return reservations

    def perform_create(self, serializer: Any) -> None:
        serializer.instance = save_reservation(self.request.user, None, **serializer.validated_data)

    def perform_update(self, serializer: Any) -> None:
        serializer.instance = save_reservation(self.request.user, serializer.instance, **serializer.validated_data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        delete_reservation(request.user, self.get_object())
        return Response(status=204)

    @extend_schema(
        request=CostRequestSerializer,
        responses={200: CostPreviewSerializer},
        filters=False,
        operation_id="v1_reservations_preview_cost",
    )
    @action(detail=False, methods=["post"], url_path="preview-cost", filter_backends=[], pagination_class=None)
    def preview_cost(self, request: Request) -> Response:
        """What making this reservation would cost the queue: a create's body (the same
        validation and 400s), plus ``suggest_from``/``suggest_until`` for the start in that
        range that displaces least. Nothing is saved."""
        return self._cost(request, None)

    @extend_schema(
        request=CostRequestSerializer,
        responses={200: CostPreviewSerializer},
        filters=False,
        operation_id="v1_reservations_preview_change_cost",
    )
    @action(detail=True, methods=["post"], url_path="preview-cost", url_name="preview-change-cost", filter_backends=[])
    def preview_change_cost(self, request: Request, pk: str | None = None) -> Response:
        """What changing this reservation as a ``PATCH`` would cost, measured against
        the world without it. Nothing is saved."""
        return self._cost(request, self.get_object())

    def _cost(self, request: Request, reservation: Reservation | None) -> Response:
        if not isinstance(request.data, Mapping):
            raise serializers.ValidationError({"non_field_errors": ["Expected an object."]})
        body = {name: value for name, value in request.data.items() if name not in RANGE_FIELDS}
        span = SuggestRangeSerializer(data={name: request.data[name] for name in RANGE_FIELDS if name in request.data})
        serializer = ReservationSerializer(reservation, data=body, partial=reservation is not None)
        valid, ranged = serializer.is_valid(), span.is_valid()
        if not (valid and ranged):
            raise serializers.ValidationError({**span.errors, **serializer.errors})
        found = preview_cost(
            window_of(serializer.validated_data),
            timezone.now(),
            replacing=reservation.name if reservation else None,
            earliest=span.validated_data.get("suggest_from"),
            latest=span.validated_data.get("suggest_until"),
        )
        return Response(CostPreviewSerializer(found).data)
