"""Writes on the people side that need more than a plain model save."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from portal.models import ApiToken, AuditEntry


def create_api_token(user: Any, name: str) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is not stored and not shown again."""
    prefix, secret = ApiToken.new_secret()
    token = ApiToken.objects.create(user=user, name=name, key_prefix=prefix, digest=ApiToken.hash(secret))
    return token, secret


def revoke_api_token(token: ApiToken) -> None:
    """Idempotent: revoking a revoked token keeps the first revocation time."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def record_audit(actor: Any, action: str, target: models.Model, changes: dict[str, Any] | None = None) -> AuditEntry:
    """Append who changed what, and how (``{"field": [old, new]}``), to the audit log."""
    return AuditEntry.objects.create(
        at=timezone.now(),
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=actor.get_username() if getattr(actor, "pk", None) else "system",
        action=action,
        target_type=str(target._meta.verbose_name),
        target_id=str(target.pk or ""),
        target_repr=str(target)[:200],
        changes=changes or {},
    )


def field_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{"field": [old, new]}`` for every key whose value differs (both sides JSON-safe)."""
    return {
        key: [before.get(key), after.get(key)]
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    }
