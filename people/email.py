"""A user's e-mail address, where their notifications by e-mail go
(``notifications.send``): who sets it, and the rules an address follows.

Who sets it: the user, on their profile or with ``PATCH /api/v1/me/``, unless they sign
in through the site's directory. Then the directory does, at every sign-in:
django-auth-ldap copies the LDAP entry's ``mail`` (``AUTH_LDAP_ALWAYS_UPDATE_USER``,
``quartermaster/ldap_settings.py``) and ``people.oidc`` the provider's ``email`` claim.
An address typed here would be overwritten at the next sign-in, so for those users the
portal takes none and says where theirs comes from. A user came from a directory when
their cluster identity did (its ``source``), and only while that directory is on.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import BaseUserManager
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from common.api.validators import plain_address
from people.choices import IdentitySource
from people.models import ClusterIdentity


def address_directory(user: Any) -> str | None:
    """The directory that sets ``user``'s address at each sign-in, in words for a page
    ("your organisation's directory (LDAP)"), or None when the user sets it."""
    source = ClusterIdentity.objects.filter(user_id=user.pk).values_list("source", flat=True).first()
    if source == IdentitySource.LDAP and settings.LDAP_SERVER_URI:
        return "your organisation's directory (LDAP)"
    if source == IdentitySource.OIDC and settings.OIDC_ENABLED:
        return f"your organisation's sign-in ({settings.OIDC_PROVIDER_NAME})"
    return None


def clean_address(user: Any, value: str) -> str:
    """``value`` as ``user``'s new address ("" clears it), its domain in lower case as
    Django stores it; raises ``ValidationError`` saying why not: the directory sets it,
    it holds a control character, or it breaks Django's ``EmailField`` rules."""
    if directory := address_directory(user):
        raise ValidationError(f"Your address comes from {directory} each time you sign in; change it there.")
    if not value:
        return ""
    plain_address(value)
    validate_email(value)
    return BaseUserManager.normalize_email(value)
