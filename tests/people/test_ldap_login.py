"""Signing in with the site's LDAP directory: a REAL slapd (Debian's, started by
scripts/ldap-dev.sh on a free port with scripts/ldap-dev/people.ldif), never a mock.

Each login brings the user's POSIX identity and their groups' accounts; a group
removed in the directory removes the account at the next login. Skips here without
slapd or python-ldap, fails in CI (QM_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from people.models import Account, AuditEntry, ClusterIdentity, Membership
from tests.conftest import _missing

ROOT = Path(__file__).resolve().parents[2]
BASE = "dc=qm,dc=test"
GROUPS = {
    f"cn=nlp,ou=groups,{BASE}": ("nlp", "member"),
    f"cn=nlp-leads,ou=groups,{BASE}": ("nlp", "coordinator"),
}


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        import django_auth_ldap  # noqa: F401
        import ldap  # noqa: F401
    except ImportError:
        _missing("python-ldap is not installed (needs libldap2-dev and libsasl2-dev; see requirements-ldap.txt)")
    if not shutil.which("slapd") and not shutil.which("apt-get"):
        _missing("slapd is not installed (apt-get install slapd ldap-utils)")
    home = tmp_path_factory.mktemp("slapd")
    script = ROOT / "scripts/ldap-dev.sh"
    started = subprocess.run(["bash", str(script), "start", str(home)], capture_output=True, text=True, timeout=300)
    if started.returncode != 0:
        _missing(f"could not start slapd: {started.stderr.strip()[-500:]}")
    yield started.stdout.strip()
    subprocess.run(["bash", str(script), "stop", str(home)], check=False, timeout=30)


@pytest.fixture
def directory(slapd: str, settings: Any, db: None) -> str:
    """The portal signs people in against the dev directory (its settings as the settings
    module builds them from LDAP_* variables)."""
    from quartermaster.ldap_settings import ldap_settings

    for name, value in ldap_settings(
        uri=slapd,
        user_base=f"ou=people,{BASE}",
        group_base=f"ou=groups,{BASE}",
        bind_dn=f"cn=admin,{BASE}",
        bind_password="admin-pw",
        staff_group=f"cn=hpc-admins,ou=groups,{BASE}",
    ).items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        "people.directory.DirectoryBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    settings.LDAP_ACCOUNT_GROUPS = GROUPS
    Account.objects.create(name="nlp")
    return slapd


def ldap_modify(uri: str, tmp_path: Path, dn: str, operation: str, value: str) -> None:
    """Change the directory as its admin would, with ldapmodify (``operation``: add or
    delete ``value``, an ``attribute: value`` line, on ``dn``)."""
    change = tmp_path / f"{operation}.ldif"
    attribute = value.split(":", 1)[0]
    change.write_text(f"dn: {dn}\nchangetype: modify\n{operation}: {attribute}\n{value}\n")
    subprocess.run(
        ["ldapmodify", "-x", "-H", uri, "-D", f"cn=admin,{BASE}", "-w", "admin-pw", "-f", str(change)],
        check=True,
        capture_output=True,
        timeout=30,
    )


def sign_in(username: str, password: str) -> Client:
    client = Client()
    response = client.post("/login/", {"username": username, "password": password})
    assert response.status_code == 302, f"{username} could not sign in"
    return client


def test_a_directory_user_signs_in_with_their_posix_identity_and_their_groups_account(directory):
    client = sign_in("ada", "ada-ldap-pw")

    me = client.get("/api/v1/me/").json()
    assert (me["username"], me["email"], me["is_staff"]) == ("ada", "ada@qm.test", False)
    assert me["memberships"] == [{"account": "nlp", "role": "member", "is_default": False}]
    assert me["cluster_identity"] == {"username": "ada", "uid": 30001, "gid": 30001, "source": "ldap"}
    assert AuditEntry.objects.filter(actor_name="ldap", target_type="cluster identity", action="create").exists()


def test_the_highest_role_of_a_users_groups_wins_and_staff_come_from_their_group(directory):
    sign_in("grace", "grace-ldap-pw")
    sign_in("linus", "linus-ldap-pw")

    grace = Membership.objects.get(user__username="grace")
    assert (grace.account.name, grace.role) == ("nlp", "coordinator")
    assert Membership.objects.filter(user__username="linus").count() == 0
    from django.contrib.auth import get_user_model

    assert get_user_model().objects.get(username="linus").is_staff


def test_a_wrong_directory_password_signs_nobody_in(directory):
    response = Client().post("/login/", {"username": "ada", "password": "guess"})

    assert response.status_code == 200 and "_auth_user_id" not in response.wsgi_request.session


def test_a_group_removed_in_the_directory_removes_the_account_at_the_next_login(directory, tmp_path):
    sign_in("ada", "ada-ldap-pw")
    assert Membership.objects.filter(user__username="ada", account__name="nlp").exists()
    ldap_modify(directory, tmp_path, f"cn=nlp,ou=groups,{BASE}", "delete", "memberUid: ada")
    try:
        sign_in("ada", "ada-ldap-pw")

        assert not Membership.objects.filter(user__username="ada").exists()
        [removed] = AuditEntry.objects.filter(actor_name="ldap", target_type="membership", action="delete")
        assert removed.changes["account"] == ["nlp", None]
    finally:
        ldap_modify(directory, tmp_path, f"cn=nlp,ou=groups,{BASE}", "add", "memberUid: ada")


def test_an_identity_that_would_take_another_users_uid_is_not_applied(directory, world):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=30001)

    sign_in("ada", "ada-ldap-pw")

    assert not ClusterIdentity.objects.filter(user__username="ada").exists()  # staff must look
    assert Membership.objects.filter(user__username="ada", account__name="nlp").exists()


def test_local_accounts_still_sign_in_beside_the_directory(directory, world):
    sign_in("alice", "pw-alice")


def test_a_user_removed_from_the_directory_is_disabled_by_the_sync_and_their_tokens_stop(directory, tmp_path, settings):
    from rest_framework.test import APIClient

    from people.directory import sync_directory

    settings.LDAP_SERVER_URI = directory
    secret = sign_in("ada", "ada-ldap-pw").post("/api/v1/tokens/", {"name": "laptop"}).json()["token"]
    script = APIClient()
    script.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert script.get("/api/v1/me/").status_code == 200
    assert sync_directory() == {"users": 1, "disabled": 0}

    entry = f"uid=ada,ou=people,{BASE}"
    saved = subprocess.run(
        ["ldapsearch", "-x", "-LLL", "-H", directory, "-D", f"cn=admin,{BASE}", "-w", "admin-pw", "-b", entry],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    admin = ["-x", "-H", directory, "-D", f"cn=admin,{BASE}", "-w", "admin-pw"]
    subprocess.run(["ldapdelete", *admin, entry], check=True, capture_output=True, timeout=30)
    try:
        assert sync_directory() == {"users": 1, "disabled": 1}

        assert script.get("/api/v1/me/").status_code == 401  # at once, not at a next login
        assert AuditEntry.objects.filter(actor_name="ldap", action="disable").exists()
    finally:
        restore = tmp_path / "ada.ldif"
        restore.write_text(saved)
        subprocess.run(["ldapadd", *admin, "-f", str(restore)], check=True, capture_output=True, timeout=30)


def test_a_directory_that_finds_nobody_disables_nobody(directory, settings):
    from django.contrib.auth import get_user_model

    from people.directory import sync_directory

    sign_in("ada", "ada-ldap-pw")
    settings.LDAP_SERVER_URI = settings.AUTH_LDAP_SERVER_URI = "ldap://127.0.0.1:9"  # nothing listens there

    assert sync_directory() == {"users": 1, "disabled": 0, "refused": 1}
    assert get_user_model().objects.get(username="ada").is_active


def test_a_system_uid_from_the_directory_is_not_applied(directory, world):
    from people.identity_facts import apply_directory_facts

    apply_directory_facts(world.alice, posix_user="daemon", uid=1, gid=1, groups=[], group_map=GROUPS, source="ldap")

    assert not ClusterIdentity.objects.filter(user=world.alice).exists()
