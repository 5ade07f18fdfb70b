"""``/api/v1/notifications/``: a user's own notification choices and the messages sent to
them, the API side of the profile page (same model, same rules)."""

from __future__ import annotations

from typing import Any, cast

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.strict import RejectUnknownFields
from notifications import outbound
from notifications.models import Delivery, Event, Preference


class PreferenceSerializer(RejectUnknownFields, serializers.ModelSerializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=Event.choices), required=False, help_text="What to be told about."
    )

    class Meta:
        model = Preference
        fields = ["events", "email", "webhook_url", "webhook_format", "webhook_secret"]
        read_only_fields = ["webhook_secret"]
        extra_kwargs = {
            "email": {
                "help_text": "By e-mail, to the address of GET /api/v1/me/. true is refused while you have none: "
                "no e-mail is made for a user without an address."
            }
        }

    def validate_email(self, value: bool) -> bool:
        if value and not cast(Preference, self.instance).user.email:
            raise serializers.ValidationError(
                "You have no e-mail address, so no e-mail can be sent: set one first "
                '(PATCH /api/v1/me/ {"email": ...}).'
            )
        return value

    def validate_events(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def validate_webhook_url(self, value: str) -> str:
        if value and (reason := outbound.refusal(value)):
            raise serializers.ValidationError(reason)
        return value

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and "webhook_secret" in data:
            raise serializers.ValidationError(
                {"webhook_secret": ["The portal makes the secret; it cannot be set (a weak one would be forgeable)."]}
            )
        return super().to_internal_value(data)


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = [
            "id",
            "created_at",
            "channel",
            "event",
            "job",
            "subject",
            "status",
            "attempts",
            "last_error",
            "sent_at",
            "key",
        ]


class PreferenceView(generics.GenericAPIView):
    """Your notification choices (defaults until you save some: e-mail for started,
    ended, held and idle)."""

    serializer_class = PreferenceSerializer
    permission_classes = [IsAuthenticated]
    pagination_class = None

    def get(self, request: Request) -> Response:
        return Response(
            PreferenceSerializer(Preference.of(cast(int, request.user.pk), staff=request.user.is_staff)).data
        )

    @extend_schema(request=PreferenceSerializer, responses=PreferenceSerializer)
    def patch(self, request: Request) -> Response:
        body = PreferenceSerializer(
            Preference.of(cast(int, request.user.pk), staff=request.user.is_staff), data=request.data, partial=True
        )
        body.is_valid(raise_exception=True)
        body.save()
        return Response(body.data)


class DeliveryList(generics.ListAPIView):
    """The messages sent to you (or still being tried), newest first."""

    serializer_class = DeliverySerializer
    permission_classes = [IsAuthenticated]

    def get_queryset(self) -> Any:
        return Delivery.objects.filter(user_id=cast(int, self.request.user.pk)).order_by("-id")


urlpatterns = [
    path("notifications/preferences/", PreferenceView.as_view(), name="notification-preferences"),
    path("notifications/deliveries/", DeliveryList.as_view(), name="notification-deliveries"),
]
