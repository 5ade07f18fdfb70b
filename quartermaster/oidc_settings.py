"""mozilla-django-oidc's settings for a provider, built in one place: the settings module
calls :func:`oidc_settings` when ``OIDC_RP_CLIENT_ID`` is set, and the tests call it for
their own provider process. :func:`discover` reads a provider's discovery document, for
``manage.py oidc_discover`` and the tests (never at start-up: a provider that is down
must not stop the portal). No models here: the settings module imports it."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

#: Discovery document key -> the setting (and environment variable) that holds it.
ENDPOINTS = {
    "authorization_endpoint": "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "token_endpoint": "OIDC_OP_TOKEN_ENDPOINT",
    "userinfo_endpoint": "OIDC_OP_USER_ENDPOINT",
    "jwks_uri": "OIDC_OP_JWKS_ENDPOINT",
}


def oidc_settings(
    *,
    client_id: str,
    client_secret: str,
    authorization_endpoint: str,
    token_endpoint: str,
    userinfo_endpoint: str,
    jwks_endpoint: str,
    sign_algo: str = "RS256",
    scopes: str = "openid email profile",
) -> dict[str, Any]:
    """The ``OIDC_*`` settings for a provider: the authorization-code flow with PKCE, the
    ID token's signature checked (with the provider's published keys for RS256/ES256).
    Every endpoint and the secret are required: a half-configured provider stops start-up
    instead of failing at the first login."""
    values: dict[str, Any] = {
        "OIDC_RP_CLIENT_ID": client_id,
        "OIDC_RP_CLIENT_SECRET": client_secret,
        "OIDC_OP_AUTHORIZATION_ENDPOINT": authorization_endpoint,
        "OIDC_OP_TOKEN_ENDPOINT": token_endpoint,
        "OIDC_OP_USER_ENDPOINT": userinfo_endpoint,
        "OIDC_OP_JWKS_ENDPOINT": jwks_endpoint,
    }
    if sign_algo == "HS256":  # signed with the client secret: no keys to fetch
        values.pop("OIDC_OP_JWKS_ENDPOINT")
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise ImproperlyConfigured(f"OIDC_RP_CLIENT_ID is set, so {', '.join(missing)} must be set too")
    for name, value in values.items():
        if name.startswith("OIDC_OP_") and not value.startswith(("https://", "http://")):
            raise ImproperlyConfigured(f"{name} must be an http(s) URL, got {value!r}")
    return values | {
        "OIDC_ENABLED": True,
        "OIDC_RP_SIGN_ALGO": sign_algo,
        "OIDC_RP_SCOPES": scopes,
        "OIDC_USE_PKCE": True,
        # mozilla-django-oidc's default, said here: the username comes from the claims.
        "OIDC_CREATE_USER": True,
        "LOGIN_REDIRECT_URL_FAILURE": "/login/?signin=failed",  # web.signin shows why
    }


def discover(issuer: str, *, timeout: float = 10.0) -> dict[str, str]:
    """The provider's endpoints from ``<issuer>/.well-known/openid-configuration``, by the
    name of the setting that holds each. Raises ``ValueError`` naming what is wrong."""
    import requests

    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=timeout)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ValueError(f"cannot read {url}: {exc}") from None
    missing = [key for key in ENDPOINTS if not document.get(key)]
    if missing:
        raise ValueError(f"{url} names no {', '.join(missing)}")
    return {setting: str(document[key]) for key, setting in ENDPOINTS.items()}
