"""People-side API: accounts, memberships, QOS, quotas (read for members, write for
staff), personal API tokens and ``me``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.db import transaction
from django.db.models import Model, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from common.api.permissions import IsStaffOrReadOnly
from people import services
from people.access import default_account, member_account_ids, visible_accounts, visible_quotas
from people.api.serializers import (
    AccountSerializer,
    ApiTokenSerializer,
    ClusterIdentitySerializer,
    MembershipSerializer,
    MeSerializer,
    MeUpdateSerializer,
    NewApiTokenSerializer,
    QosSerializer,
    QuotaSerializer,
)
from people.models import Account, ApiToken, ClusterIdentity, Membership, Qos, Quota


class AuditedModelViewSet(viewsets.ModelViewSet):
    """Create, update and destroy through the model's verb-first services (``save`` and
    ``delete`` in :attr:`audited_writes`), which record the audit entry; the serializer
    validates and shapes only."""

    audited_writes: tuple[Callable[..., Any], Callable[[Any, Any], None]]

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        save, _ = self.audited_writes
        serializer.instance = save(self.request.user, None, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        save, _ = self.audited_writes
        serializer.instance = save(self.request.user, serializer.instance, **serializer.validated_data)

    def perform_destroy(self, instance: Model) -> None:
        _, delete = self.audited_writes
        delete(self.request.user, instance)


class AccountViewSet(AuditedModelViewSet):
    queryset = Account.objects.none()  # per user, see get_queryset
    serializer_class = AccountSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_fields = ["name"]
    ordering_fields = ["name", "shares", "created_at"]
    ordering = ["name"]
    audited_writes = (services.save_account, services.delete_account)

    def get_queryset(self) -> QuerySet[Account]:
        return visible_accounts(self.request.user).select_related("parent")


class MembershipViewSet(AuditedModelViewSet):
    queryset = Membership.objects.none()  # per user, see get_queryset
    serializer_class = MembershipSerializer
    permission_classes = [IsStaffOrReadOnly]
    ordering_fields = ["id", "role"]
    ordering = ["id"]
    audited_writes = (services.save_membership, services.delete_membership)

    def get_queryset(self) -> QuerySet[Membership]:
        base = Membership.objects.select_related("user", "account")
        user = self.request.user
        return base if user.is_staff else base.filter(account_id__in=member_account_ids(user))


class QosViewSet(viewsets.ModelViewSet):
    queryset = Qos.objects.prefetch_related("may_preempt")
    serializer_class = QosSerializer
    permission_classes = [IsStaffOrReadOnly]
    ordering_fields = ["name", "priority"]
    ordering = ["name"]


class ClusterIdentityViewSet(AuditedModelViewSet):
    """Who each user is on the clusters: the POSIX user their jobs run as. Staff see and
    set everyone's; a user sees only their own (also in ``me``)."""

    queryset = ClusterIdentity.objects.none()  # per user, see get_queryset
    serializer_class = ClusterIdentitySerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_fields = ["username"]
    ordering_fields = ["username", "uid"]
    ordering = ["username"]
    audited_writes = (services.save_identity, services.delete_identity)

    def get_queryset(self) -> QuerySet[ClusterIdentity]:
        base = ClusterIdentity.objects.select_related("user")
        return base if self.request.user.is_staff else base.filter(user_id=cast(int, self.request.user.pk))


class QuotaViewSet(AuditedModelViewSet):
    queryset = Quota.objects.none()  # per user, see get_queryset
    serializer_class = QuotaSerializer
    permission_classes = [IsStaffOrReadOnly]
    ordering_fields = ["id"]
    ordering = ["id"]
    audited_writes = (services.save_quota, services.delete_quota)

    def get_queryset(self) -> QuerySet[Quota]:
        return visible_quotas(self.request.user).select_related("account", "user")


class ApiTokenViewSet(mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    """Your personal API tokens. The secret is returned once, at creation."""

    queryset = ApiToken.objects.none()  # per user, see get_queryset
    serializer_class = ApiTokenSerializer
    permission_classes = [IsAuthenticated]
    ordering_fields = ["created_at", "name"]
    ordering = ["-created_at"]

    def get_queryset(self) -> QuerySet[ApiToken]:
        return ApiToken.objects.filter(user_id=cast(int, self.request.user.pk))

    @extend_schema(request=ApiTokenSerializer, responses={201: NewApiTokenSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A new token, from a signed-in session only: a token that could mint tokens
        would keep its holder in after it was revoked."""
        if isinstance(request.auth, ApiToken):
            raise PermissionDenied(
                "Tokens are created from a signed-in session (the API tokens page), not with a token."
            )
        body = ApiTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        token, secret = services.create_api_token(
            request.user,
            data["name"],
            expires_in_days=data.get("expires_in_days"),
            read_only=data.get("read_only", False),
        )
        data = NewApiTokenSerializer(token).data | {"token": secret}
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        services.revoke_api_token(instance)


class MeView(generics.GenericAPIView):
    serializer_class = MeSerializer
    permission_classes = [IsAuthenticated]
    pagination_class = None

    def get(self, request: Request) -> Response:
        user = request.user
        memberships = Membership.objects.filter(user_id=cast(int, user.pk)).select_related("account")
        default = default_account(user)
        return Response(
            MeSerializer(
                {
                    "username": user.get_username(),
                    "email": getattr(user, "email", ""),
                    "is_staff": user.is_staff,
                    "memberships": memberships,
                    "cluster_identity": ClusterIdentity.objects.filter(user_id=cast(int, user.pk)).first(),
                    "default_account": default.name if default else None,
                }
            ).data
        )

    @extend_schema(request=MeUpdateSerializer, responses=MeSerializer)
    def patch(self, request: Request) -> Response:
        """Set your default account, your e-mail address, or both (each change audited)."""
        body = MeUpdateSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        changes = body.validated_data
        with transaction.atomic():
            if "default_account" in changes:
                services.set_default_account(request.user, changes["default_account"])
            if "email" in changes:
                services.set_email(request.user, request.user, changes["email"])
        return self.get(request)
