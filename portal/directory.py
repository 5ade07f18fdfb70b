"""Logins from a site's directory (LDAP now; OIDC's claims carry the same facts): who
the user is on the clusters and which accounts they belong to, read at every login.

Why at every login: the directory is where a site adds and removes people, so a user
removed from a group loses the account it maps to the next time they sign in, and a
changed uid follows them; staff do not keep two lists in step by hand.

What the directory decides, and nothing else:

1. The user's cluster identity (POSIX name, uid, gid), marked ``source`` ldap; one
   that would take another user's name or uid, or a system uid, is refused and logged.
2. Memberships of the accounts its groups map to (``LDAP_ACCOUNT_GROUPS``, read by
   ``portal.env.env_group_map``: group DN -> account and role; several groups of one
   account: the highest role wins). An account
   in the map that none of the user's groups names loses the user. Memberships of
   accounts outside the map are staff's, and stay.
3. The staff flag, through django-auth-ldap's ``AUTH_LDAP_USER_FLAGS_BY_GROUP``.

Every change is written through ``portal.services`` and so audited, by "ldap".

Between logins, :func:`sync_directory` (a periodic job, ``LDAP_SYNC_SECONDS``) applies
the same facts to every user who came from the directory, and disables one whose entry
is gone: their sessions and API tokens stop working then, not at their next login.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import ldap
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django_auth_ldap.backend import LDAPBackend, _LDAPUser

from portal import services
from portal.choices import IdentitySource, Role
from portal.models import Account, ClusterIdentity, Membership

log = logging.getLogger(__name__)

#: Roles from least to most: a user in several groups of one account gets the last.
_RANK = [Role.MEMBER, Role.COORDINATOR]


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend that also applies the directory's facts (see the
    module docstring) each time a user signs in, and when :func:`sync_directory` reads
    them without a password (``populate_user``)."""

    def authenticate_ldap_user(self, ldap_user: _LDAPUser, password: str) -> Any:
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            _apply(user, ldap_user)
        return user

    def populate_user(self, username: str) -> Any:
        ldap_user = _LDAPUser(self, username=username)
        user = ldap_user.populate_user()
        if user is not None:
            _apply(user, ldap_user)
        return user


def _apply(user: Any, ldap_user: _LDAPUser) -> None:
    attrs = ldap_user.attrs or {}
    apply_directory_facts(
        user,
        posix_user=_first(attrs.get("uid")) or user.get_username(),
        uid=_number(_first(attrs.get("uidnumber"))),
        gid=_number(_first(attrs.get("gidnumber"))),
        groups=ldap_user.group_dns,
        group_map=settings.LDAP_ACCOUNT_GROUPS,
        source=IdentitySource.LDAP,
    )


def sync_directory() -> dict[str, int]:
    """Read every active user who came from the directory (cluster identity from LDAP)
    again: apply their facts, and disable those whose entry is gone (audited; staff
    enable them again). Returns counts. Does nothing while LDAP is off. A directory that
    does not answer changes nothing (``refused: 1``): django-auth-ldap would find no one
    there, and disabling everyone would lock the site out."""
    if not settings.LDAP_SERVER_URI:
        return {"users": 0, "disabled": 0}
    users = [i.user for i in ClusterIdentity.objects.filter(source=IdentitySource.LDAP, user__is_active=True)]
    backend = DirectoryBackend()
    if not _directory_answers(backend):
        log.error("directory sync: %s does not answer; nothing changed", backend.settings.SERVER_URI)
        return {"users": len(users), "disabled": 0, "refused": 1}
    missing = [user for user in users if backend.populate_user(user.get_username()) is None]
    for user in missing:
        with transaction.atomic():
            type(user).objects.filter(pk=user.pk).update(is_active=False)
            services.record_audit("ldap", "disable", user, {"is_active": [True, False]})
        log.warning("directory sync: %s is no longer in the directory; disabled", user)
    return {"users": len(users), "disabled": len(missing)}


def _directory_answers(backend: DirectoryBackend) -> bool:
    """Whether the directory takes the portal's search bind and answers a search of the
    people base (django-auth-ldap's own lookups cannot tell "gone" from "unreachable")."""
    config = backend.settings  # django-auth-ldap's view of the AUTH_LDAP_* settings
    connection = ldap.initialize(config.SERVER_URI)
    connection.set_option(ldap.OPT_NETWORK_TIMEOUT, 5)
    try:
        connection.simple_bind_s(config.BIND_DN, config.BIND_PASSWORD)
        connection.search_s(config.USER_SEARCH.base_dn, ldap.SCOPE_BASE, attrlist=["1.1"])
    except ldap.LDAPError:
        return False
    finally:
        connection.unbind_s()
    return True


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
    directory says (see the module docstring). Idempotent."""
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
        ClusterIdentity(user=user, **fields).full_clean(exclude=["user"], validate_unique=False)
        with transaction.atomic():
            services.save_identity(str(source), stored, user=user, **fields)
    except (IntegrityError, ValidationError) as exc:  # a clash or a system id: staff must look
        log.warning("directory identity %s (uid %s) not applied to %s: %s", posix_user, uid, user, exc)


def _first(values: list[str] | None) -> str:
    return values[0] if values else ""


def _number(text: str) -> int | None:
    return int(text) if text.isdigit() else None
