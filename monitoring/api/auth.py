"""Node agents authenticate with a node token: ``Authorization: Bearer qmnode_<prefix>_<secret>``."""

from __future__ import annotations

import hmac
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from monitoring.models import NodeToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


class NodeTokenAuthentication(authentication.BaseAuthentication):
    """Look the token up by its public prefix, then compare digests in constant time.

    ``request.auth`` is the :class:`NodeToken` (with its node); ``request.user`` is
    anonymous: a node is not a person and gets no other permission.
    """

    def authenticate(self, request: Request) -> tuple[Any, NodeToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in ("bearer", "token"):
            return None
        if len(header) != 2 or not header[1].startswith(NodeToken.PREFIX) or header[1].count("_") < 2:
            raise exceptions.AuthenticationFailed("Malformed node token.")
        token = header[1]
        prefix = token[len(NodeToken.PREFIX) :].split("_", 1)[0]
        record = NodeToken.objects.select_related("node").filter(key_prefix=prefix, revoked_at__isnull=True).first()
        if record is None or not hmac.compare_digest(record.digest, NodeToken.hash(token)):
            raise exceptions.AuthenticationFailed("Invalid or revoked node token.")
        now = timezone.now()
        if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
            NodeToken.objects.filter(pk=record.pk).update(last_used_at=now)
        return AnonymousUser(), record

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="node"'


class IsNodeAgent(permissions.BasePermission):
    message = "A node token is required."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, NodeToken)


class NodeTokenScheme(OpenApiAuthenticationExtension):
    target_class = "monitoring.api.auth.NodeTokenAuthentication"
    name = "nodeToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "qmnode_<prefix>_<secret>"}
