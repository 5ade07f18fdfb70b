"""``/api/v1/reservations/``: reservations and maintenance windows (``scontrol create
reservation``). Everyone signed in reads them (they decide where jobs may run); staff
create, change and delete them (``scheduler.clusters.reservations``: audited, and made in
Slurm too)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.fields import SlugRelatedField
from common.api.permissions import IsStaffOrReadOnly
from common.api.strict import RejectUnknownFields
from people.models import Account
from scheduler.clusters.reservations import delete_reservation, save_reservation
from scheduler.models import Node, Reservation
from scheduler.reads.reservations import nodes_for_gpus

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
