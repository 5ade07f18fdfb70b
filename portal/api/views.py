"""People-side API: accounts, memberships, QOS, quotas (read for members, write for
staff), personal API tokens and ``me``."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from portal import services
from portal.access import member_account_ids, visible_accounts, visible_quotas
from portal.api.permissions import IsStaffOrReadOnly
from portal.api.serializers import (
    AccountSerializer,
    ApiTokenSerializer,
    MembershipSerializer,
    MeSerializer,
    NewApiTokenSerializer,
    QosSerializer,
    QuotaSerializer,
)
from portal.models import Account, ApiToken, Membership, Qos, Quota


class AccountViewSet(viewsets.ModelViewSet):
    queryset = Account.objects.none()  # per user, see get_queryset
    serializer_class = AccountSerializer
    permission_classes = [IsStaffOrReadOnly]
    filterset_fields = ["name"]
    ordering_fields = ["name", "shares", "created_at"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Account]:
        return visible_accounts(self.request.user).select_related("parent")


class MembershipViewSet(viewsets.ModelViewSet):
    queryset = Membership.objects.none()  # per user, see get_queryset
    serializer_class = MembershipSerializer
    permission_classes = [IsStaffOrReadOnly]
    ordering_fields = ["id", "role"]
    ordering = ["id"]

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


class QuotaViewSet(viewsets.ModelViewSet):
    queryset = Quota.objects.none()  # per user, see get_queryset
    serializer_class = QuotaSerializer
    permission_classes = [IsStaffOrReadOnly]
    ordering_fields = ["id"]
    ordering = ["id"]

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
        body = ApiTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, secret = services.create_api_token(request.user, body.validated_data["name"])
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
        return Response(
            MeSerializer(
                {
                    "username": user.get_username(),
                    "email": getattr(user, "email", ""),
                    "is_staff": user.is_staff,
                    "memberships": memberships,
                }
            ).data
        )
