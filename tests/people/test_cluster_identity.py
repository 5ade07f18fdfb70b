"""Cluster identities: who each user is on the clusters, set by staff, never a system account."""

from __future__ import annotations

from typing import Any

import pytest

from people.models import AuditEntry, ClusterIdentity
from scheduler.backends.base import RunAs
from scheduler.clusters.dispatch import job_spec
from tests.builders import submit

pytestmark = pytest.mark.django_db

URL = "/api/v1/identities/"


def test_staff_set_a_users_cluster_identity_and_it_is_audited(world: Any, client_for: Any) -> None:
    response = client_for(world.admin).post(URL, {"user": "alice", "username": "alice", "uid": 5001, "gid": 5001})

    assert response.status_code == 201, response.json()
    identity = ClusterIdentity.objects.get(user=world.alice)
    assert (identity.username, identity.uid, identity.gid, identity.source) == ("alice", 5001, 5001, "staff")
    [entry] = AuditEntry.objects.filter(target_type="cluster identity")
    assert (entry.actor, entry.action, entry.changes["username"]) == (world.admin, "create", [None, "alice"])


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"username": "root"}, "username", "never run as root"),
        ({"username": "Alice Smith"}, "username", "A POSIX user name"),
        ({"username": "-u"}, "username", "A POSIX user name"),
        ({"uid": 0}, "uid", "system id"),
        ({"uid": 999}, "uid", "system id"),
        ({"gid": 27}, "gid", "system id"),
        ({"user": "nobody-here"}, "user", "does not exist"),
    ],
    ids=["root", "spaces", "an option", "uid 0", "system uid", "system gid", "unknown user"],
)
def test_a_job_can_never_be_given_root_or_a_system_identity(
    world: Any, client_for: Any, body: dict[str, Any], field: str, words: str
) -> None:
    response = client_for(world.admin).post(URL, {"user": "alice", "username": "alice", **body}, format="json")

    assert response.status_code == 400
    assert words in str(response.json()[field])
    assert not ClusterIdentity.objects.exists()


def test_two_users_cannot_share_a_name_or_a_uid_and_one_user_has_one(world: Any, client_for: Any) -> None:
    admin = client_for(world.admin)
    assert admin.post(URL, {"user": "alice", "username": "alice", "uid": 5001}).status_code == 201

    assert "user" in admin.post(URL, {"user": "alice", "username": "alice2"}).json()
    assert "username" in admin.post(URL, {"user": "bob", "username": "alice"}).json()
    assert "uid" in admin.post(URL, {"user": "bob", "username": "bob", "uid": 5001}).json()
    assert ClusterIdentity.objects.count() == 1


def test_researchers_see_only_their_own_and_change_none(world: Any, client_for: Any) -> None:
    ClusterIdentity.objects.create(user=world.alice, username="alice")
    ClusterIdentity.objects.create(user=world.bob, username="bob")
    alice = client_for(world.alice)

    assert [i["username"] for i in alice.get(URL).json()["results"]] == ["alice"]
    assert alice.get("/api/v1/me/").json()["cluster_identity"]["username"] == "alice"
    assert alice.post(URL, {"user": "alice", "username": "root2"}).status_code == 403
    mine = ClusterIdentity.objects.get(user=world.alice)
    assert alice.patch(f"{URL}{mine.pk}/", {"username": "bob2"}).status_code == 403
    assert client_for(world.charlie).get("/api/v1/me/").json()["cluster_identity"] is None


def test_a_dispatched_job_carries_its_owners_identity(world: Any) -> None:
    ClusterIdentity.objects.create(user=world.alice, username="asmith", uid=5001, gid=6000)
    mine, theirs = submit(world.alice, world.lab), submit(world.bob, world.lab)

    assert job_spec(mine).run_as == RunAs("asmith", 5001, 6000)
    assert job_spec(theirs).run_as is None  # a backend that runs jobs as owners refuses it


def test_submit_needs_an_identity_only_where_a_cluster_runs_jobs_as_their_owners(world: Any, client_for: Any) -> None:
    from scheduler.models import Cluster, Job

    body = {"name": "train", "command": "true", "walltime_seconds": 600, "gpus_per_node": 1}
    alice = client_for(world.alice)
    assert alice.post("/api/v1/jobs/", body, format="json").status_code == 201  # the local cluster only

    hpc = Cluster.objects.create(name="hpc", kind="slurm", config={})
    refused = alice.post("/api/v1/jobs/", body, format="json")
    assert refused.status_code == 400
    assert (
        "no cluster identity" in refused.json()["cluster_identity"][0]
        and "hpc" in refused.json()["cluster_identity"][0]
    )
    assert Job.objects.count() == 1

    hpc.config = {"run_as_owner": False}  # a site that runs every job as the portal says so
    hpc.save()
    assert alice.post("/api/v1/jobs/", body, format="json").status_code == 201
    hpc.config = {}
    hpc.save()
    ClusterIdentity.objects.create(user=world.alice, username="alice")
    assert alice.post("/api/v1/jobs/", body, format="json").status_code == 201
