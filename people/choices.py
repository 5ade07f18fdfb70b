"""Enumerations of the people side."""

from django.db import models


class IdentitySource(models.TextChoices):
    """Where a user's cluster identity came from: set by staff, or read at login from the
    directory (LDAP) or the identity provider's claims (OIDC), which then own it."""

    # Read after "set by" ("set by staff"), so not "Set by staff" itself.
    STAFF = "staff", "staff"
    LDAP = "ldap", "LDAP directory"
    OIDC = "oidc", "OIDC claims"


class Role(models.TextChoices):
    MEMBER = "member", "Member"
    COORDINATOR = "coordinator", "Coordinator"
