"""django-auth-ldap's settings for a directory, built in one place: the settings module
calls :func:`ldap_settings` when ``LDAP_SERVER_URI`` is set, and the tests call it for
their own slapd. No models here: the settings module imports it while Django loads."""

from __future__ import annotations

from typing import Any


def ldap_settings(
    *,
    uri: str,
    user_base: str,
    group_base: str,
    bind_dn: str = "",
    bind_password: str = "",
    user_filter: str = "(uid=%(user)s)",
    group_type: str = "posix",
    staff_group: str = "",
) -> dict[str, Any]:
    """The ``AUTH_LDAP_*`` settings for a directory (the settings module and the tests
    build them here, so both configure django-auth-ldap the same way)."""
    import ldap
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch, PosixGroupType

    group_class, group_kind = (
        ("posixGroup", PosixGroupType()) if group_type == "posix" else ("groupOfNames", GroupOfNamesType())
    )
    values: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": bind_password,
        "AUTH_LDAP_USER_SEARCH": LDAPSearch(user_base, ldap.SCOPE_SUBTREE, user_filter),
        "AUTH_LDAP_GROUP_SEARCH": LDAPSearch(group_base, ldap.SCOPE_SUBTREE, f"(objectClass={group_class})"),
        "AUTH_LDAP_GROUP_TYPE": group_kind,
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_CONNECTION_OPTIONS": {ldap.OPT_NETWORK_TIMEOUT: 5, ldap.OPT_REFERRALS: 0},
    }
    if staff_group:
        values["AUTH_LDAP_USER_FLAGS_BY_GROUP"] = {"is_staff": staff_group}
    return values
