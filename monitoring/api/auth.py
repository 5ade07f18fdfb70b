"""Node agents authenticate with a node token: ``Authorization: Bearer qmnode_<prefix>_<secret>``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, permissions
from rest_framework.request import Request

from common.db.sql import JoinedRows
from monitoring.models import NodeToken
from people.auth import bearer_token

NODE_TOKENS = JoinedRows(NodeToken, "node")


class NodeTokenAuthentication(authentication.BaseAuthentication):
    """Node tokens (see :func:`people.auth.bearer_token`).

    ``request.auth`` is the :class:`NodeToken` (with its node); ``request.user`` is
    anonymous: a node is not a person and gets no other permission.
    """

    def authenticate(self, request: Request) -> tuple[Any, NodeToken] | None:
        record = bearer_token(request, NODE_TOKENS, "node token")
        return None if record is None else (AnonymousUser(), record)

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
