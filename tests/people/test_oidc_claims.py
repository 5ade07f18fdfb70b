"""How an OIDC provider's claims become a portal user (people.oidc), without the
provider: the browser tests (tests/browser/test_oidc_login.py) run the real flow."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from people.models import ClusterIdentity, Membership
from people.oidc import apply_claims, claim_username
from quartermaster.oidc_settings import oidc_settings

SETTINGS = Path(__file__).resolve().parents[2] / "quartermaster" / "settings.py"
ENDPOINTS = {
    "authorization_endpoint": "https://idp.example.org/auth",
    "token_endpoint": "https://idp.example.org/token",
    "userinfo_endpoint": "https://idp.example.org/userinfo",
    "jwks_endpoint": "https://idp.example.org/certs",
}


@pytest.fixture
def claims_map(settings):
    settings.OIDC_USERNAME_CLAIM = "preferred_username"
    settings.OIDC_POSIX_USERNAME_CLAIM = ""
    settings.OIDC_UID_CLAIM = settings.OIDC_GID_CLAIM = ""
    settings.OIDC_GROUPS_CLAIM = "groups"
    settings.OIDC_STAFF_GROUP = ""
    settings.OIDC_ACCOUNT_GROUPS = {"lab-members": ("lab", "member")}
    return settings


@pytest.mark.parametrize(
    "value, expected",
    [("ada", "ada"), ("ada.l@lab", "ada.l@lab"), ("", None), (None, None), (7, None), ("a b", None), ("x" * 151, None)],
)
def test_the_username_claim_must_be_one_django_accepts(claims_map, value, expected):
    assert claim_username({"preferred_username": value}) == expected


def test_a_provider_without_uid_claims_keeps_the_ids_staff_set(claims_map, world):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, gid=20000)
    apply_claims(world.alice, {"preferred_username": "alice", "groups": ["lab-members"]})
    identity = ClusterIdentity.objects.get(user=world.alice)
    assert (identity.username, identity.uid, identity.gid, identity.source) == ("alice", 20001, 20000, "oidc")


def test_a_new_posix_name_without_uid_claims_drops_the_old_ids(claims_map, world):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, gid=20000)
    claims_map.OIDC_POSIX_USERNAME_CLAIM = "posix"
    apply_claims(world.alice, {"preferred_username": "alice", "posix": "alice2"})
    identity = ClusterIdentity.objects.get(user=world.alice)
    assert (identity.username, identity.uid, identity.gid) == ("alice2", None, None)


def test_uid_claims_as_numbers_or_strings_and_bad_ones_are_no_id(claims_map, world):
    claims_map.OIDC_UID_CLAIM, claims_map.OIDC_GID_CLAIM = "uidNumber", "gidNumber"
    apply_claims(world.alice, {"preferred_username": "alice", "uidNumber": "20001", "gidNumber": -5})
    identity = ClusterIdentity.objects.get(user=world.alice)
    assert (identity.uid, identity.gid) == (20001, None)


def test_one_group_as_a_string_counts_and_anything_else_is_no_group(claims_map, world):
    apply_claims(world.charlie, {"preferred_username": "charlie", "groups": "lab-members"})
    assert Membership.objects.get(user=world.charlie, account=world.lab).role == "member"
    apply_claims(world.charlie, {"preferred_username": "charlie", "groups": {"lab-members": True}})
    assert not Membership.objects.filter(user=world.charlie, account=world.lab).exists()


def test_mapped_groups_compare_without_case_and_the_staff_group_makes_staff(claims_map, world):
    claims_map.OIDC_STAFF_GROUP = "HPC-Admins"
    charlie = world.charlie
    apply_claims(charlie, {"preferred_username": "charlie", "groups": ["LAB-MEMBERS", "hpc-admins"]})
    charlie.refresh_from_db()
    assert charlie.is_staff
    assert Membership.objects.get(user=charlie, account=world.lab).role == "member"
    apply_claims(charlie, {"preferred_username": "charlie", "groups": []})
    charlie.refresh_from_db()
    assert not charlie.is_staff
    assert not Membership.objects.filter(user=charlie, account=world.lab).exists()
    assert Membership.objects.filter(user=charlie, account=world.other).exists()  # not in the map: staff's


def test_the_oidc_addresses_are_not_found_while_oidc_is_off(settings, db):
    settings.OIDC_ENABLED = False
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/?code=x&state=y").status_code == 404
    assert b"oidc-signin" not in Client().get("/login/").content


def test_a_half_configured_provider_stops_start_up():
    with pytest.raises(ImproperlyConfigured, match="OIDC_OP_TOKEN_ENDPOINT must be set too"):
        oidc_settings(client_id="qm", client_secret="s", **{**ENDPOINTS, "token_endpoint": ""})
    with pytest.raises(ImproperlyConfigured, match="OIDC_RP_CLIENT_SECRET"):
        oidc_settings(client_id="qm", client_secret="", **ENDPOINTS)
    with pytest.raises(ImproperlyConfigured, match="OIDC_OP_JWKS_ENDPOINT must be an http"):
        oidc_settings(client_id="qm", client_secret="s", **{**ENDPOINTS, "jwks_endpoint": "idp/certs"})


def test_the_settings_module_turns_oidc_on_from_the_environment(monkeypatch):
    monkeypatch.setenv("OIDC_RP_CLIENT_ID", "qm")
    monkeypatch.setenv("OIDC_RP_CLIENT_SECRET", "s")
    for name, url in zip(
        ["OIDC_OP_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_USER_ENDPOINT", "OIDC_OP_JWKS_ENDPOINT"],
        ENDPOINTS.values(),
        strict=True,
    ):
        monkeypatch.setenv(name, url)
    values = runpy.run_path(str(SETTINGS))
    assert values["OIDC_ENABLED"] and values["OIDC_USE_PKCE"]
    assert values["AUTHENTICATION_BACKENDS"][1] == "people.oidc.ClaimsBackend"
    monkeypatch.setenv("OIDC_OP_USER_ENDPOINT", "")
    with pytest.raises(ImproperlyConfigured, match="OIDC_OP_USER_ENDPOINT must be set too"):
        runpy.run_path(str(SETTINGS))
