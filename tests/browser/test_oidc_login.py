"""Signing in with the site's OpenID Connect provider: a REAL provider process
(django-oauth-toolkit in OIDC mode, scripts/oidc-dev/provider.py, on a free port) and the
real authorization-code flow with PKCE in Chromium, never a mock.

Each login brings the claims' POSIX identity, their groups' accounts and the staff flag;
a group removed at the provider removes the account at the next login; an identity the
portal must not run jobs as (root) is refused; a disabled user gets a clear page.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User

from people.models import Account, AuditEntry, ClusterIdentity, Membership
from tests.conftest import _missing

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = ROOT / "scripts" / "oidc-dev" / "provider.py"
CLIENT_ID, CLIENT_SECRET = "qm-portal", "qm-portal-dev-secret"


@dataclass
class Provider:
    issuer: str
    people: Path

    def set_groups(self, name: str, groups: list[str]) -> None:
        """Change someone's groups at the provider, as the site's admin would."""
        people = json.loads(self.people.read_text())
        people[name]["groups"] = groups
        self.people.write_text(json.dumps(people))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def provider(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    try:
        import oauth2_provider  # noqa: F401
    except ImportError:
        _missing("django-oauth-toolkit is not installed (pip install -r requirements-dev.txt)")
    home = tmp_path_factory.mktemp("oidc-provider")
    people = home / "people.json"
    shutil.copy(PROVIDER.parent / "people.json", people)
    port = free_port()
    process = subprocess.Popen(
        [
            *[sys.executable, str(PROVIDER), "--home", str(home), "--port", str(port)],
            *["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET, "--people", str(people)],
            *["--redirect-uri", f"{live_server.url}/oidc/callback/"],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    issuer = f"http://127.0.0.1:{port}/o"
    try:
        wait_until_it_answers(f"{issuer}/.well-known/openid-configuration", process)
        yield Provider(issuer=issuer, people=people)
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_until_it_answers(url: str, process: subprocess.Popen[str]) -> None:
    """Polls ``url`` until it answers; a provider that exits first fails with its output."""
    deadline = time.monotonic() + 120  # the provider migrates its database first
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the OIDC provider exited: {process.stdout.read() if process.stdout else ''}")
        try:
            if requests.get(url, timeout=5).ok:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    pytest.fail(f"the OIDC provider did not answer at {url}")


@pytest.fixture
def oidc(provider: Provider, settings: Any, transactional_db: None) -> Provider:
    """The portal signs people in with the dev provider, configured as a site would:
    endpoints from ``manage.py oidc_discover``, settings as the settings module builds them."""
    from django.core.management import call_command

    from quartermaster.oidc_settings import oidc_settings

    lines = _command_output(call_command, "oidc_discover", provider.issuer)
    endpoints = dict(line.split("=", 1) for line in lines.splitlines())
    for name, value in oidc_settings(
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        authorization_endpoint=endpoints["OIDC_OP_AUTHORIZATION_ENDPOINT"],
        token_endpoint=endpoints["OIDC_OP_TOKEN_ENDPOINT"],
        userinfo_endpoint=endpoints["OIDC_OP_USER_ENDPOINT"],
        jwks_endpoint=endpoints["OIDC_OP_JWKS_ENDPOINT"],
    ).items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        "people.oidc.ClaimsBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    settings.OIDC_PROVIDER_NAME = "QM dev identity provider"
    settings.OIDC_POSIX_USERNAME_CLAIM = "posix_username"
    settings.OIDC_UID_CLAIM, settings.OIDC_GID_CLAIM = "uid_number", "gid_number"
    settings.OIDC_STAFF_GROUP = "hpc-admins"
    settings.OIDC_ACCOUNT_GROUPS = {"nlp": ("nlp", "member"), "nlp-leads": ("nlp", "coordinator")}
    Account.objects.create(name="nlp")
    return provider


def _command_output(call: Callable[..., Any], *args: str) -> str:
    from io import StringIO

    out = StringIO()
    call(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def sign_in(fresh_page: Callable[[], Any], live_server: Any) -> Callable[..., Any]:
    """``sign_in("ada")``: the whole flow in a fresh browser context, from the portal's
    login page through the provider's own login form and back; returns the page."""

    def flow(name: str) -> Any:
        page = fresh_page()
        page.goto("/login/")
        page.click("#oidc-signin")
        page.wait_for_url("http://127.0.0.1:*/login/**")  # the provider's page, not the portal's
        page.fill("#id_username", name)
        page.fill("#id_password", f"{name}-oidc-pw")
        page.click("#provider-login")
        page.wait_for_url(f"{live_server.url}/**")
        return page

    return flow


def test_the_login_page_offers_the_provider_beside_the_password_form(oidc, fresh_page, shot):
    page = fresh_page()
    page.goto("/login/")
    button, form = page.locator("#oidc-signin"), page.locator("form.narrow")
    assert button.inner_text() == "Sign in with QM dev identity provider"
    top, bottom = button.bounding_box(), form.bounding_box()
    assert top["y"] + top["height"] <= bottom["y"], "the button sits above the password form, not over it"
    shot(page, "oidc-login")


def test_signing_in_brings_the_identity_the_accounts_and_the_role(oidc, sign_in, live_server):
    page = sign_in("ada")
    assert page.url == f"{live_server.url}/"
    assert "ada" in page.locator("header").inner_text()
    ada = User.objects.get(username="ada")
    identity = ClusterIdentity.objects.get(user=ada)
    assert (identity.username, identity.uid, identity.gid, identity.source) == ("ada", 30001, 30000, "oidc")
    assert Membership.objects.get(user=ada).role == "coordinator"  # nlp-leads outranks nlp
    assert not ada.has_usable_password()  # the provider checks passwords, never the portal
    assert not ada.is_staff and ada.email == "ada@qm.test"


def test_the_staff_group_makes_staff_and_the_posix_name_may_differ(oidc, sign_in):
    sign_in("grace")
    grace = User.objects.get(username="grace")
    assert grace.is_staff
    assert ClusterIdentity.objects.get(user=grace).username == "ghopper"
    assert AuditEntry.objects.filter(actor_name="oidc", action="update", changes__is_staff=[False, True]).exists()


def test_a_group_removed_at_the_provider_removes_the_account_at_the_next_login(oidc, sign_in):
    sign_in("ada")
    oidc.set_groups("ada", ["nlp"])
    sign_in("ada")
    assert Membership.objects.get(user__username="ada").role == "member"
    oidc.set_groups("ada", [])
    sign_in("ada")
    assert not Membership.objects.filter(user__username="ada").exists()
    assert AuditEntry.objects.filter(actor_name="oidc", action="delete", target_type="membership").exists()


def test_a_provider_that_says_root_signs_in_without_a_cluster_identity(oidc, sign_in):
    sign_in("mallory")
    mallory = User.objects.get(username="mallory")
    assert not ClusterIdentity.objects.filter(user=mallory).exists()  # uid 0: never run jobs as root


def test_a_disabled_user_is_told_and_stays_out(oidc, sign_in, live_server, shot):
    User.objects.create_user("linus", is_active=False)
    page = sign_in("linus")
    assert page.url == f"{live_server.url}/login/?signin=failed"
    assert "did not succeed" in page.locator("#signin-failed").inner_text()
    shot(page, "oidc-login-refused")
    assert page.locator("#oidc-signin").is_visible()
