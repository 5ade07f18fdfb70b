"""Writes on the people side that need more than a plain model save."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from portal.models import ApiToken


def create_api_token(user: Any, name: str) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is not stored and not shown again."""
    prefix, secret = ApiToken.new_secret()
    token = ApiToken.objects.create(user=user, name=name, key_prefix=prefix, digest=ApiToken.hash(secret))
    return token, secret


def revoke_api_token(token: ApiToken) -> None:
    """Idempotent: revoking a revoked token keeps the first revocation time."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
