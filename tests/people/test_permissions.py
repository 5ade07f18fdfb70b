"""Accounts, memberships, QOS and quotas: members read, staff write; nodes and clusters."""

from __future__ import annotations

import pytest

from people.models import AuditEntry, Quota

pytestmark = pytest.mark.django_db


def names(response):
    return sorted(row.get("name") or row.get("account") for row in response.json()["results"])


def test_members_see_only_their_accounts(world, client_for):
    assert names(client_for(world.alice).get("/api/v1/accounts/")) == ["lab"]
    assert names(client_for(world.charlie).get("/api/v1/accounts/")) == ["other"]
    assert names(client_for(world.admin).get("/api/v1/accounts/")) == ["lab", "other"]


@pytest.mark.parametrize("who,status", [("alice", 403), ("bob", 403), ("admin", 201)])
def test_only_staff_create_accounts(world, client_for, who, status):
    response = client_for(getattr(world, who)).post("/api/v1/accounts/", {"name": "new", "parent": "lab", "shares": 5})
    assert response.status_code == status


def test_account_cannot_become_its_own_ancestor(world, client_for):
    client = client_for(world.admin)
    child = client.post("/api/v1/accounts/", {"name": "child", "parent": "lab"}).json()
    response = client.patch(f"/api/v1/accounts/{world.lab.id}/", {"parent": "child"}, format="json")
    assert response.status_code == 400
    assert "parent" in response.json()
    assert child["parent"] == "lab"


def test_account_in_use_cannot_be_deleted(world, client_for):
    from tests.builders import submit

    submit(world.alice, world.lab)
    response = client_for(world.admin).delete(f"/api/v1/accounts/{world.lab.id}/")
    assert response.status_code == 409
    assert not AuditEntry.objects.exists()


def test_quotas_visible_to_members_writable_by_staff(world, client_for):
    Quota.objects.create(account=world.lab, max_pending_jobs=10)
    Quota.objects.create(account=world.other, max_pending_jobs=3)
    assert names(client_for(world.alice).get("/api/v1/quotas/")) == ["lab"]
    assert names(client_for(world.charlie).get("/api/v1/quotas/")) == ["other"]
    denied = client_for(world.alice).post("/api/v1/quotas/", {"user": "alice", "max_pending_jobs": 99})
    assert denied.status_code == 403
    made = client_for(world.admin).post("/api/v1/quotas/", {"user": "alice", "max_pending_jobs": 99}, format="json")
    assert made.status_code == 201


@pytest.mark.parametrize(
    "body,field",
    [
        ({"max_pending_jobs": 1}, "account"),
        ({"account": "lab", "user": "alice"}, "account"),
        ({"account": "lab", "max_pending_jobs": -1}, "max_pending_jobs"),
        ({"account": "lab", "max_gpus_per_model": {"H100-80GB": -2}}, "max_gpus_per_model"),
    ],
)
def test_bad_quota_is_400_with_field(world, client_for, body, field):
    response = client_for(world.admin).post("/api/v1/quotas/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not AuditEntry.objects.exists()


def test_nodes_readable_by_all_drainable_by_staff(world, client_for):
    node = world.cluster.nodes.first()
    listing = client_for(world.charlie).get("/api/v1/nodes/").json()
    assert listing["count"] == world.cluster.nodes.count()
    assert len(listing["results"][0]["gpus"]) > 0
    assert client_for(world.alice).post(f"/api/v1/nodes/{node.id}/drain/", {"reason": "x"}).status_code == 403
    drained = client_for(world.admin).post(f"/api/v1/nodes/{node.id}/drain/", {"reason": "bad fan"})
    assert (drained.json()["state"], drained.json()["reason"]) == ("drain", "bad fan")
    assert client_for(world.admin).post(f"/api/v1/nodes/{node.id}/drain/", {}).status_code == 400
    resumed = client_for(world.admin).post(f"/api/v1/nodes/{node.id}/resume/")
    assert resumed.json()["state"] == "up"


@pytest.mark.parametrize("who,status", [("alice", 403), ("charlie", 403), ("admin", 200)])
def test_clusters_are_for_staff(world, client_for, who, status):
    assert client_for(getattr(world, who)).get("/api/v1/clusters/").status_code == status


def test_cluster_with_bad_config_is_400(world, client_for):
    client = client_for(world.admin)
    bad_kind = client.post("/api/v1/clusters/", {"name": "x", "kind": "pbs", "config": {}}, format="json")
    assert bad_kind.status_code == 400 and "kind" in bad_kind.json()
    bad_config = client.post("/api/v1/clusters/", {"name": "y", "kind": "local", "config": {"nodes": 5}}, format="json")
    assert bad_config.status_code == 400 and "config" in bad_config.json()


def test_me_lists_memberships(world, client_for):
    body = client_for(world.bob).get("/api/v1/me/").json()
    assert body == {
        "username": "bob",
        "email": "bob@example.org",
        "is_staff": False,
        "memberships": [{"account": "lab", "role": "coordinator", "is_default": False}],
        "cluster_identity": None,
        "default_account": "lab",
    }
