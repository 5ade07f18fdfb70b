"""What a site's identity source says about a user, applied to the portal: the cluster
identity and the memberships of the accounts their groups map to. One home for the LDAP
backend (``people.directory``) and the OIDC backend (``people.oidc``), so both decide the
same way; no LDAP or OIDC library is imported here.

1. The cluster identity (POSIX name, uid, gid) with its ``source``; one that would take
   another user's name or uid, or a system uid, is refused and logged (staff must look).
2. Memberships of the accounts in the group map (group -> account and role; several
   groups of one account: the highest role wins). An account in the map that none of the
   user's groups names loses the user; memberships of accounts outside the map are
   staff's, and stay.

Every change is written through ``people.services`` and so audited, by the source's name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from people import services
from people.choices import Role
from people.models import Account, ClusterIdentity, Membership

log = logging.getLogger(__name__)

#: Roles from least to most: a user in several groups of one account gets the last.
_RANK = [Role.MEMBER, Role.COORDINATOR]


def apply_directory_facts(
    user: Any,
    *,
    posix_user: str,
    uid: int | None,
    gid: int | None,
    groups: Iterable[str],
    group_map: Mapping[str, tuple[str, str]],
    source: str,
) -> None:
    """Bring the user's cluster identity and mapped memberships in line with what the
    identity source says (see the module docstring). Idempotent."""
    actor = str(source)
    _apply_identity(user, posix_user, uid, gid, source)
    wanted: dict[str, str] = {}
    for dn in (g.lower() for g in groups):
        if dn in group_map:
            name, role = group_map[dn]
            if _RANK.index(Role(role)) >= _RANK.index(Role(wanted.get(name, Role.MEMBER))):
                wanted[name] = role
    mapped = {name for name, _ in group_map.values()}
    accounts = {a.name: a for a in Account.objects.filter(name__in=mapped)}
    current = {m.account.name: m for m in Membership.objects.filter(user=user, account__name__in=mapped)}
    with transaction.atomic():
        for name, role in wanted.items():
            account = accounts.get(name)
            if account is None:
                log.warning("directory group maps to account %r, which does not exist", name)
            elif name not in current:
                services.save_membership(actor, None, user=user, account=account, role=role)
            elif current[name].role != role:
                services.save_membership(actor, current[name], role=role)
        for name, membership in current.items():
            if name not in wanted:
                services.delete_membership(actor, membership)


def _apply_identity(user: Any, posix_user: str, uid: int | None, gid: int | None, source: str) -> None:
    """Set the identity the directory gives, checked by the model's own validators (a
    POSIX name, not root, no system uid or gid); a clash with another user's name or uid
    is the database's refusal."""
    stored = ClusterIdentity.objects.filter(user=user).first()
    fields = {"username": posix_user, "uid": uid, "gid": gid, "source": source}
    if stored is not None and all(getattr(stored, k) == v for k, v in fields.items()):
        return
    try:
        candidate = ClusterIdentity(pk=stored.pk if stored else None, user=user, **fields)
        candidate._state.adding = stored is None  # as the stored row: its own uid is no clash
        candidate.full_clean(exclude=["user"], validate_unique=False)
        with transaction.atomic():
            services.save_identity(str(source), stored, user=user, **fields)
    except (IntegrityError, ValidationError) as exc:  # a clash or a system id: staff must look
        log.warning("directory identity %s (uid %s) not applied to %s: %s", posix_user, uid, user, exc)


def posix_id(value: object) -> int | None:
    """A uid or gid as a directory attribute (``"30001"``) or a claim (``30001`` or
    ``"30001"``) gives it; anything else (absent, negative, not a number) is no id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    text = str(value or "").strip()
    return int(text) if text.isdigit() else None


def apply_staff_flag(user: Any, is_staff: bool, *, source: str) -> None:
    """Make ``user`` staff or not, as the identity source's staff group says (audited)."""
    if user.is_staff == is_staff:
        return
    with transaction.atomic():
        type(user).objects.filter(pk=user.pk).update(is_staff=is_staff)
        services.record_audit(str(source), "update", user, {"is_staff": [user.is_staff, is_staff]})
    user.is_staff = is_staff
