"""Logins from a site's OpenID Connect provider (Keycloak, Azure AD, Google, ...) with
mozilla-django-oidc: the authorization-code flow with PKCE, the ID token checked against
the provider's keys, and the userinfo claims mapped to the portal, at every login:

- the portal user is the ``OIDC_USERNAME_CLAIM`` (``preferred_username``); a provider
  that sends none, or one Django cannot use as a username, signs nobody in;
- the cluster identity comes from ``OIDC_POSIX_USERNAME_CLAIM`` (default: the username)
  and, when the provider carries them, ``OIDC_UID_CLAIM``/``OIDC_GID_CLAIM``, source oidc;
- the ``OIDC_GROUPS_CLAIM`` list maps to accounts and roles by ``OIDC_ACCOUNT_GROUPS``
  (``group=account:role``), and membership of ``OIDC_STAFF_GROUP`` makes staff.

``people.identity_facts`` applies them exactly as it applies an LDAP directory's, so a
group removed at the provider removes the account at the next login, and an identity that
would take someone else's uid, or a system uid, is refused. Why match by username and not
by e-mail (mozilla-django-oidc's default): the username is what the site's directory and
the clusters know a person by; two people may share an address, never a username.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from people.choices import IdentitySource
from people.identity_facts import apply_directory_facts, apply_staff_flag, posix_id
from people.models import ClusterIdentity

log = logging.getLogger(__name__)

_USERNAME = UnicodeUsernameValidator()


class ClaimsBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, matching users by username and applying the claims
    (see the module docstring) each time a user signs in."""

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        username = claim_username(claims)
        if username is None:
            log.warning("OIDC login refused: claim %r is missing or not a username", settings.OIDC_USERNAME_CLAIM)
        return username is not None

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=claim_username(claims))

    def describe_user_by_claims(self, claims: dict[str, Any]) -> str:
        return f"username {claim_username(claims)}"

    def create_user(self, claims: dict[str, Any]) -> Any:
        with transaction.atomic():
            user = self.UserModel.objects.create_user(claim_username(claims), email=claims.get("email", ""))
            user.set_unusable_password()  # the provider checks their password, never the portal
            user.save(update_fields=["password"])
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        apply_claims(user, claims)
        return user


def claim_username(claims: dict[str, Any]) -> str | None:
    """The portal username the claims name, or None when it is absent or not one Django
    accepts (150 characters of letters, digits and @.+-_)."""
    value = claims.get(settings.OIDC_USERNAME_CLAIM)
    if not isinstance(value, str) or not value or len(value) > 150:
        return None
    try:
        _USERNAME(value)
    except ValidationError:
        return None
    return value


def apply_claims(user: Any, claims: dict[str, Any]) -> None:
    """Bring ``user`` in line with the provider's claims (see the module docstring)."""
    _apply_profile(user, claims)
    groups = _groups(claims.get(settings.OIDC_GROUPS_CLAIM))
    posix_user = str(claims.get(settings.OIDC_POSIX_USERNAME_CLAIM or settings.OIDC_USERNAME_CLAIM) or user.username)
    uid, gid = _claimed_ids(user, posix_user, claims)
    apply_directory_facts(
        user,
        posix_user=posix_user,
        uid=uid,
        gid=gid,
        groups=groups,
        group_map=settings.OIDC_ACCOUNT_GROUPS,
        source=IdentitySource.OIDC,
    )
    if settings.OIDC_STAFF_GROUP:
        is_staff = settings.OIDC_STAFF_GROUP.lower() in {g.lower() for g in groups}
        apply_staff_flag(user, is_staff, source=IdentitySource.OIDC)


def _groups(value: object) -> list[str]:
    """The groups claim: a list of names (one name alone counts as a list of one;
    anything else, or a non-string entry, names no group)."""
    if isinstance(value, str):
        return [value]
    return [g for g in value if isinstance(g, str)] if isinstance(value, list) else []


def _apply_profile(user: Any, claims: dict[str, Any]) -> None:
    profile = {"email": "email", "first_name": "given_name", "last_name": "family_name"}
    changed = {field: claims[claim] for field, claim in profile.items() if isinstance(claims.get(claim), str)}
    changed = {field: value for field, value in changed.items() if getattr(user, field) != value}
    for field, value in changed.items():
        setattr(user, field, value)
    if changed:
        user.save(update_fields=list(changed))


def _claimed_ids(user: Any, posix_user: str, claims: dict[str, Any]) -> tuple[int | None, int | None]:
    """The uid and gid the claims carry. Many providers carry none (no OIDC_UID_CLAIM):
    then the ones staff set for the same POSIX name stay, rather than being wiped."""
    stored = ClusterIdentity.objects.filter(user=user, username=posix_user).first()
    uid = posix_id(claims.get(settings.OIDC_UID_CLAIM)) if settings.OIDC_UID_CLAIM else stored.uid if stored else None
    gid = posix_id(claims.get(settings.OIDC_GID_CLAIM)) if settings.OIDC_GID_CLAIM else stored.gid if stored else None
    return uid, gid
