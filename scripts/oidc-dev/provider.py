"""A real OpenID Connect provider for the OIDC login tests and for trying OIDC by hand:
django-oauth-toolkit in OIDC mode, in its own process with its own settings and SQLite
database (nothing of the portal's is imported or shared).

    python scripts/oidc-dev/provider.py --home DIR --port PORT \\
        --client-id qm --client-secret SECRET --redirect-uri http://127.0.0.1:8000/oidc/callback/

People come from a JSON file (``--people``, default ``people.json`` beside this script):
name -> password, email, names, POSIX name/uid/gid and groups. Claims are read from it again
at every token, so a test can change someone's groups between two logins, as a
site's admin changes them in Keycloak. Every person's facts are released as claims of the
ID token and of the userinfo endpoint (``preferred_username``, ``email``, ``groups``,
``posix_username``, ``uid_number``, ``gid_number``).

The client is confidential, authorization-code with PKCE, RS256 (a fresh key each start),
and consent is skipped (``skip_authorization``), as a site's own portal usually is.
Discovery: ``http://127.0.0.1:PORT/o/.well-known/openid-configuration``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def configure(home: Path, port: int) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from django.conf import settings

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    settings.configure(
        DEBUG=False,
        SECRET_KEY="qm-dev-oidc-provider-not-secret",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "oauth2_provider",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        ROOT_URLCONF=__name__,
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(home / "provider.sqlite3")}},
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "DIRS": [str(HERE / "templates")],
                "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
            }
        ],
        LOGIN_URL="/login/",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        USE_TZ=True,
        # The portal's session cookie is also "sessionid" on 127.0.0.1 (cookies ignore ports).
        SESSION_COOKIE_NAME="qm_dev_idp_session",
        CSRF_COOKIE_NAME="qm_dev_idp_csrf",
        OAUTH2_PROVIDER={
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": pem,
            "OIDC_ISS_ENDPOINT": f"http://127.0.0.1:{port}/o",
            "PKCE_REQUIRED": True,
            "SCOPES": {"openid": "OpenID Connect", "profile": "profile", "email": "email"},
            "OAUTH2_VALIDATOR_CLASS": f"{__name__}.PeopleValidator",
        },
    )


#: The people file (``--people``), read again for every token.
PEOPLE = HERE / "people.json"


def read_people() -> dict[str, dict[str, Any]]:
    people: dict[str, dict[str, Any]] = json.loads(PEOPLE.read_text())
    return people


def sync_people() -> None:
    """Make the provider's users match the people file (passwords included)."""
    from django.contrib.auth.models import User

    for name, person in read_people().items():
        user, _ = User.objects.get_or_create(username=name)
        user.email = person.get("email", "")
        user.set_password(person["password"])
        user.save()


def make_client(client_id: str, secret: str, redirect_uri: str) -> None:
    from oauth2_provider.models import Application

    Application.objects.filter(client_id=client_id).delete()
    Application.objects.create(
        name="Quartermaster",
        client_id=client_id,
        client_secret=secret,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uri,
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


def build_validator() -> type:
    from oauth2_provider.oauth2_validators import OAuth2Validator

    class PeopleValidator(OAuth2Validator):
        """Releases every claim of the person (no per-scope filtering)."""

        oidc_claim_scope = None

        def get_additional_claims(self, request: Any) -> dict[str, Any]:
            person = read_people().get(request.user.username, {})
            claims = {"preferred_username": request.user.username}
            for claim in ("email", "given_name", "family_name", "posix_username", "uid_number", "gid_number"):
                if claim in person:
                    claims[claim] = person[claim]
            claims["groups"] = list(person.get("groups", []))
            return claims

    return PeopleValidator


def build_urls() -> list[Any]:
    from django.contrib.auth import views as auth_views
    from django.urls import include, path

    return [
        path("login/", auth_views.LoginView.as_view(), name="login"),
        path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="a directory for the provider's database")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--redirect-uri", required=True, help="the portal's /oidc/callback/ address")
    parser.add_argument("--people", type=Path, default=HERE / "people.json")
    args = parser.parse_args()
    args.home.mkdir(parents=True, exist_ok=True)
    (args.home / "provider.sqlite3").unlink(missing_ok=True)
    global PEOPLE
    PEOPLE = args.people.resolve()
    configure(args.home, args.port)

    import django

    django.setup()
    globals()["PeopleValidator"] = build_validator()
    globals()["urlpatterns"] = build_urls()

    from django.core.management import call_command
    from django.core.servers.basehttp import run
    from django.core.wsgi import get_wsgi_application

    call_command("migrate", verbosity=0, interactive=False)
    sync_people()
    make_client(args.client_id, args.client_secret, args.redirect_uri)
    print(f"oidc provider: http://127.0.0.1:{args.port}/o", flush=True)
    run("127.0.0.1", args.port, get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main()
