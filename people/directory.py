"""Logins from a site's LDAP directory: who the user is on the clusters and which
accounts they belong to, read at every login (``people.oidc`` does the same from an
OIDC provider's claims).

Why at every login: the directory is where a site adds and removes people, so a user
removed from a group loses the account it maps to the next time they sign in, and a
changed uid follows them; staff do not keep two lists in step by hand.

What the directory decides (``people.identity_facts`` applies the first two):

1. The user's cluster identity (``uid``, ``uidNumber``, ``gidNumber``), source ldap.
2. Memberships of the accounts its groups map to (``LDAP_ACCOUNT_GROUPS``, read by
   ``quartermaster.env.env_group_map``: group DN -> account and role).
3. The staff flag, through django-auth-ldap's ``AUTH_LDAP_USER_FLAGS_BY_GROUP``.

Every change is written through ``people.services`` and so audited, by "ldap".

Between logins, :func:`sync_directory` (a periodic job, ``LDAP_SYNC_SECONDS``) applies
the same facts to every user who came from the directory, and disables one whose entry
is gone: their sessions and API tokens stop working then, not at their next login.
"""

from __future__ import annotations

import logging
from typing import Any

import ldap
from django.conf import settings
from django.db import transaction
from django_auth_ldap.backend import LDAPBackend, _LDAPUser

from people import services
from people.choices import IdentitySource
from people.identity_facts import apply_directory_facts, posix_id
from people.models import ClusterIdentity

log = logging.getLogger(__name__)


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
        uid=posix_id(_first(attrs.get("uidnumber"))),
        gid=posix_id(_first(attrs.get("gidnumber"))),
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


def _first(values: list[str] | None) -> str:
    return values[0] if values else ""
