"""Writes on the people side: API tokens, a user's e-mail address, and accounts, quotas
and memberships, each saved with its audit entry (:func:`record_audit`) in one transaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.db import models, transaction
from django.utils import timezone

from people.limits import QUOTA_LIMITS
from people.models import Account, ApiToken, AuditEntry, ClusterIdentity, Membership, Quota, SiteTemplate

Audited = TypeVar("Audited", Account, Quota, Membership, ClusterIdentity, SiteTemplate)


def create_api_token(
    user: Any, name: str, *, expires_in_days: int | None = None, read_only: bool = False
) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is not stored and not shown again.

    Callers make sure the request came from a signed-in session, never from a token: a
    token that could mint tokens would outlive its own revocation in its children.
    """
    prefix, secret = ApiToken.new_secret()
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = ApiToken.objects.create(
        user=user,
        name=name,
        key_prefix=prefix,
        digest=ApiToken.hash(secret),
        expires_at=expires_at,
        read_only=read_only,
    )
    return token, secret


def revoke_api_token(token: ApiToken) -> None:
    """Idempotent: revoking a revoked token keeps the first revocation time."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def record_audit(actor: Any, action: str, target: models.Model, changes: dict[str, Any] | None = None) -> AuditEntry:
    """Append who changed what, and how (``{"field": [old, new]}``), to the audit log.

    ``actor`` is the user who made the change, or the name of the part of the system
    that made it on its own (``"monitoring"``); anything else (``None``, an anonymous
    user) is recorded as ``"system"``.
    """
    user = actor if getattr(actor, "pk", None) else None
    system = actor if isinstance(actor, str) and actor else "system"
    return AuditEntry.objects.create(
        at=timezone.now(),
        actor=user,
        actor_name=user.get_username() if user is not None else system,
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


# --- Accounts, quotas, memberships: each write and its audit entry in one transaction ----------------


def save_account(actor: Any, account: Account | None = None, **fields: Any) -> Account:
    """Create an account (``account`` None) or update one with ``fields`` (validated model
    field values), and audit the change. See :func:`_save_audited`."""
    return _save_audited(actor, account or Account(), fields)


def delete_account(actor: Any, account: Account) -> None:
    """Delete an account and audit it. Raises ``ProtectedError`` (nothing is recorded)
    while it has children or jobs."""
    _delete_audited(actor, account)


def save_quota(actor: Any, quota: Quota | None = None, **fields: Any) -> Quota:
    """Create or update a quota and audit the change, as :func:`save_account`."""
    return _save_audited(actor, quota or Quota(), fields)


def delete_quota(actor: Any, quota: Quota) -> None:
    """Remove a quota (its subject has no limits from now on) and audit it."""
    _delete_audited(actor, quota)


def save_membership(actor: Any, membership: Membership | None = None, **fields: Any) -> Membership:
    """Add a user to an account, or change a membership (its role), and audit it."""
    return _save_audited(actor, membership or Membership(), fields)


def delete_membership(actor: Any, membership: Membership) -> None:
    """Remove a user from an account and audit it."""
    _delete_audited(actor, membership)


def set_default_account(actor: Any, membership: Membership) -> None:
    """Make ``membership`` its user's default account (where submissions without an
    account go), unmarking the one before; both changes audited, in one transaction."""
    with transaction.atomic():
        before = Membership.objects.select_for_update().filter(user_id=membership.user_id, is_default=True)
        for old in before.exclude(pk=membership.pk):
            _save_audited(actor, old, {"is_default": False})
        if not membership.is_default:
            _save_audited(actor, membership, {"is_default": True})


def set_email(actor: Any, user: Any, address: str) -> None:
    """Set ``user``'s e-mail address (one :func:`people.email.clean_address` passed; ""
    clears it), and audit the change. Setting the address it has changes nothing."""
    with transaction.atomic():
        stored = get_user_model().objects.select_for_update().get(pk=user.pk)
        old = stored.email
        if old == address:
            return
        stored.email = user.email = address
        stored.save(update_fields=["email"])
        record_audit(actor, "update", stored, {"email": [old, address]})


def save_identity(actor: Any, identity: ClusterIdentity | None = None, **fields: Any) -> ClusterIdentity:
    """Set who a user is on the clusters (the POSIX user their jobs run as), and audit it."""
    return _save_audited(actor, identity or ClusterIdentity(), fields)


def delete_identity(actor: Any, identity: ClusterIdentity) -> None:
    """Remove a user's cluster identity (they cannot run jobs on clusters that run jobs
    as their owners until they have one again), and audit it."""
    _delete_audited(actor, identity)


def save_site_template(actor: Any, name: str, description: str, fields: dict[str, str]) -> SiteTemplate:
    """Create the site template ``name`` or replace its description and fields (audited)."""
    template = SiteTemplate.objects.filter(name=name).first() or SiteTemplate(name=name)
    return _save_audited(actor, template, {"description": description, "fields": fields, "saved_by": actor})


def delete_site_template(actor: Any, template: SiteTemplate) -> None:
    _delete_audited(actor, template)


def _limit_value(quota: Quota, name: str, per_model: bool) -> Any:
    value = getattr(quota, name)
    return dict(value or {}) if per_model else value


def audit_state(instance: Account | Quota | Membership | ClusterIdentity | SiteTemplate) -> dict[str, Any]:
    """What the audit log compares, JSON-safe: related rows by name, as the API writes them."""
    if isinstance(instance, Account):
        return {
            "name": instance.name,
            "parent": instance.parent.name if instance.parent else None,
            "shares": instance.shares,
            "description": instance.description,
            "allowed_qos": sorted(q.name for q in instance.allowed_qos.all()) if instance.pk else [],
            "default_qos": instance.default_qos.name if instance.default_qos else None,
            "idle_below_pct": instance.idle_below_pct,
            "idle_minutes": instance.idle_minutes,
            "idle_action": instance.idle_action,
            "idle_action_minutes": instance.idle_action_minutes,
        }
    if isinstance(instance, Quota):
        return {
            "account": instance.account.name if instance.account else None,
            "user": instance.user.get_username() if instance.user else None,
            **{limit.name: _limit_value(instance, limit.name, limit.per_model) for limit in QUOTA_LIMITS},
        }
    if isinstance(instance, SiteTemplate):
        return {"name": instance.name, "description": instance.description, "fields": instance.fields}
    if isinstance(instance, ClusterIdentity):
        return {
            "user": instance.user.get_username(),
            "username": instance.username,
            "uid": instance.uid,
            "gid": instance.gid,
            "source": instance.source,
        }
    return {
        "user": instance.user.get_username(),
        "account": instance.account.name,
        "role": instance.role,
        "is_default": instance.is_default,
    }


def _save_audited(actor: Any, instance: Audited, fields: dict[str, Any]) -> Audited:
    """Set ``fields`` on ``instance``, save it and record ``create`` or ``update`` with the
    fields that changed, in one transaction; returns the saved instance.

    1. The old state is read from the database, not from ``instance``: the Django admin
       hands over an instance its form has already changed.
    2. ``fields`` are validated values (a serializer's, a form's); model constraints
       still hold (``IntegrityError``, and nothing is recorded).
    """
    model = type(instance)
    with transaction.atomic():
        stored = model.objects.select_for_update().filter(pk=instance.pk).first() if instance.pk else None
        before = audit_state(stored) if stored is not None else {}
        related = {f.name for f in model._meta.many_to_many}
        for name, value in fields.items():
            if name not in related:
                setattr(instance, name, value)
        instance.save()
        for name in related & set(fields):
            getattr(instance, name).set(fields[name])  # after the save: the row needs its id
        after = audit_state(instance)
        record_audit(actor, "update" if stored is not None else "create", instance, field_changes(before, after))
    return instance


def _delete_audited(actor: Any, instance: Account | Quota | Membership | ClusterIdentity | SiteTemplate) -> None:
    """Record ``delete`` with every field going to ``None``, then delete, in one transaction."""
    with transaction.atomic():
        record_audit(actor, "delete", instance, field_changes(audit_state(instance), {}))
        instance.delete()
