"""Personal API tokens for scripts: ``Authorization: Bearer qm_<prefix>_<secret>``."""

from __future__ import annotations

import hmac
from datetime import timedelta
from typing import Any, TypeVar

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from common.db.sql import JoinedRows
from people.models import ApiToken, HashedToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


T = TypeVar("T", bound=HashedToken)


def bearer_token(request: Request, tokens: JoinedRows[T], what: str) -> T | None:
    """The live token (of ``tokens.model``, with the related rows ``tokens`` reads) in the
    request's ``Authorization: Bearer`` header, or ``None`` when the header names no
    bearer token at all.

    Looks the row up by its public prefix (SQL written once: this read is on every API
    request's path), then compares digests in constant time; a malformed, unknown or
    revoked token is ``AuthenticationFailed`` naming ``what``.
    ``last_used_at`` is written at most once a minute per token: a busy script must not
    turn every read into a database write.
    """
    header = authentication.get_authorization_header(request).decode("latin-1").split()
    if not header or header[0].lower() not in ("bearer", "token"):
        return None
    if len(header) != 2:
        raise exceptions.AuthenticationFailed("Authorization header must be '<Bearer> <token>'.")
    token = header[1]
    model = tokens.model
    if not token.startswith(model.PREFIX) or token.count("_") < 2:
        raise exceptions.AuthenticationFailed(f"Malformed {what}.")
    prefix = token[len(model.PREFIX) :].split("_", 1)[0]
    found = tokens.read("t0.key_prefix = %s AND t0.revoked_at IS NULL", [prefix])
    record = found[0] if found else None
    if record is None or not hmac.compare_digest(record.digest, model.hash(token)):
        raise exceptions.AuthenticationFailed(f"Invalid or revoked {what}.")
    now = timezone.now()
    if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
        model._default_manager.filter(pk=record.pk).update(last_used_at=now)
    return record


#: An API token with its user and the user's cluster identity: submission asks for it
#: (one query, not two).
API_TOKENS = JoinedRows(ApiToken, "user", "user__cluster_identity")


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """Personal API tokens (see :func:`bearer_token`): refused once expired or once their
    user is disabled, and a read-only token may only read."""

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        record = bearer_token(request, API_TOKENS, "API token")
        if record is None:
            return None
        if not record.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive.")
        if record.expired:
            raise exceptions.AuthenticationFailed(f"API token expired at {record.expires_at:%Y-%m-%d %H:%M} UTC.")
        if record.read_only and request.method not in SAFE_METHODS:
            raise exceptions.PermissionDenied("This API token is read-only.")
        return record.user, record

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
