"""Audit in the write path: creating, changing or deleting a quota, changing an account,
adding, changing or removing a member, draining or resuming a node records exactly one
audit entry, the same (actor, action, target, ``{"field": [old, new]}``) whichever way
the change comes: the staff pages, the API or the Django admin. A refused change
records nothing. (Monitoring's own drains: tests/monitoring/test_health.py.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from people.limits import WHOLE_LIMITS
from people.models import AuditEntry, Membership, Quota
from scheduler.choices import NodeState
from scheduler.models import Node
from tests.builders import join

pytestmark = pytest.mark.django_db

REASON = "replace GPU 3"


class Page:
    """The staff pages under /manage/: forms; a change redirects, a refused one re-renders."""

    drain_reason = REASON
    refused_status = 200

    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = Client()
        self.client.force_login(world.admin)

    def ok(self, response: Any) -> bool:
        return bool(response.status_code == 302)

    def account_page(self, account: Any, post: dict[str, Any]) -> Any:
        return self.client.post(f"/manage/accounts/{account.id}/", post)

    def create_quota(self, _: Any) -> Any:
        return self.account_page(self.world.lab, {"form": "quota", "max_gpus": "12"})

    def update_quota(self, quota: Quota) -> Any:
        return self.account_page(self.world.lab, {"form": "quota", "max_gpus": "16"})

    def delete_quota(self, quota: Quota) -> Any:
        return self.account_page(self.world.lab, {"form": "quota-delete"})

    def refused_quota(self) -> Any:
        return self.account_page(self.world.lab, {"form": "quota", "borrowing_limit_gpus": "4"})

    def update_account(self, _: Any) -> Any:
        post = {"form": "account", "name": "other", "parent": "", "shares": "5", "description": ""}
        return self.account_page(self.world.other, post)

    def add_member(self, _: Any) -> Any:
        return self.account_page(self.world.other, {"form": "member-add", "user": "dora", "role": "member"})

    def set_role(self, membership: Membership) -> Any:
        post = {"form": "member-role", "membership": membership.id, "role": "coordinator"}
        return self.account_page(self.world.other, post)

    def remove_member(self, membership: Membership) -> Any:
        return self.account_page(self.world.other, {"form": "member-remove", "membership": membership.id})

    def drain(self, node: Node) -> Any:
        return self.client.post(f"/manage/nodes/{node.id}/drain/", {"reason": REASON})

    def resume(self, node: Node) -> Any:
        return self.client.post(f"/manage/nodes/{node.id}/resume/")


class Api:
    """The REST API under /api/v1/: JSON; a refused change is a 400."""

    drain_reason = REASON
    refused_status = 400

    def __init__(self, world: Any) -> None:
        self.world = world
        self.client = APIClient()
        self.client.force_login(world.admin)

    def ok(self, response: Any) -> bool:
        return bool(200 <= response.status_code < 300)

    def create_quota(self, _: Any) -> Any:
        return self.client.post("/api/v1/quotas/", {"account": "lab", "max_gpus": 12}, format="json")

    def update_quota(self, quota: Quota) -> Any:
        return self.client.patch(f"/api/v1/quotas/{quota.id}/", {"max_gpus": 16}, format="json")

    def delete_quota(self, quota: Quota) -> Any:
        return self.client.delete(f"/api/v1/quotas/{quota.id}/")

    def refused_quota(self) -> Any:
        return self.client.post("/api/v1/quotas/", {"account": "lab", "borrowing_limit_gpus": 4}, format="json")

    def update_account(self, _: Any) -> Any:
        return self.client.patch(f"/api/v1/accounts/{self.world.other.id}/", {"shares": 5}, format="json")

    def add_member(self, _: Any) -> Any:
        body = {"user": "dora", "account": "other", "role": "member"}
        return self.client.post("/api/v1/memberships/", body, format="json")

    def set_role(self, membership: Membership) -> Any:
        return self.client.patch(f"/api/v1/memberships/{membership.id}/", {"role": "coordinator"}, format="json")

    def remove_member(self, membership: Membership) -> Any:
        return self.client.delete(f"/api/v1/memberships/{membership.id}/")

    def drain(self, node: Node) -> Any:
        return self.client.post(f"/api/v1/nodes/{node.id}/drain/", {"reason": REASON}, format="json")

    def resume(self, node: Node) -> Any:
        return self.client.post(f"/api/v1/nodes/{node.id}/resume/")


class Admin:
    """The Django admin under /admin/ (as a superuser): model forms and node actions."""

    drain_reason = "drained by admin in admin"
    refused_status = 200

    def __init__(self, world: Any) -> None:
        world.admin.is_superuser = True
        world.admin.save(update_fields=["is_superuser"])
        self.world = world
        self.client = Client()
        self.client.force_login(world.admin)

    def ok(self, response: Any) -> bool:
        return bool(response.status_code == 302)

    def quota_form(self, **values: Any) -> dict[str, Any]:
        return (
            {"account": self.world.lab.id, "user": "", "max_gpus_per_model": "{}"}
            | dict.fromkeys(WHOLE_LIMITS, "")
            | values
        )

    def create_quota(self, _: Any) -> Any:
        return self.client.post("/admin/portal/quota/add/", self.quota_form(max_gpus="12"))

    def update_quota(self, quota: Quota) -> Any:
        return self.client.post(f"/admin/portal/quota/{quota.id}/change/", self.quota_form(max_gpus="16"))

    def delete_quota(self, quota: Quota) -> Any:
        return self.client.post(f"/admin/portal/quota/{quota.id}/delete/", {"post": "yes"})

    def refused_quota(self) -> Any:
        return self.client.post("/admin/portal/quota/add/", self.quota_form(borrowing_limit_gpus="4"))

    def update_account(self, _: Any) -> Any:
        no_inline_forms = {f"memberships-{k}": "0" for k in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS")}
        post = {"name": "other", "parent": "", "shares": "5", "description": ""} | no_inline_forms
        return self.client.post(f"/admin/portal/account/{self.world.other.id}/change/", post)

    def member_form(self, role: str) -> dict[str, Any]:
        return {"user": self.world.dora.id, "account": self.world.other.id, "role": role}

    def add_member(self, _: Any) -> Any:
        return self.client.post("/admin/portal/membership/add/", self.member_form("member"))

    def set_role(self, membership: Membership) -> Any:
        return self.client.post(f"/admin/portal/membership/{membership.id}/change/", self.member_form("coordinator"))

    def remove_member(self, membership: Membership) -> Any:
        return self.client.post(f"/admin/portal/membership/{membership.id}/delete/", {"post": "yes"})

    def drain(self, node: Node) -> Any:
        return self.client.post("/admin/scheduler/node/", {"action": "drain", "_selected_action": [node.id]})

    def resume(self, node: Node) -> Any:
        return self.client.post("/admin/scheduler/node/", {"action": "resume", "_selected_action": [node.id]})


WAYS = [Page, Api, Admin]


def no_subject(world: Any) -> None:
    return None


def lab_quota(world: Any) -> Quota:
    return Quota.objects.create(account=world.lab, max_gpus=12)


def dora_in_other(world: Any) -> Membership:
    return join(world.dora, world.other)


def up_node(world: Any) -> Node:
    return Node.objects.get(name="h100-01")


def drained_node(world: Any) -> Node:
    Node.objects.filter(name="h100-01").update(state=NodeState.DRAIN, reason="bad fan")
    return Node.objects.get(name="h100-01")


@dataclass(frozen=True)
class Change:
    """One change: what exists before (``given``), the way's method that makes it (``name``),
    and the audit entry expected (``changes`` may depend on the way's drain reason)."""

    name: str
    given: Callable[[Any], Any]
    action: str
    target: tuple[str, str]  # (type, repr)
    changes: dict[str, list[Any]] | Callable[[str], dict[str, list[Any]]]


CHANGES = [
    Change(
        "create_quota",
        no_subject,
        "create",
        ("quota", "quota for lab"),
        {"account": [None, "lab"], "max_gpus": [None, 12], "max_gpus_per_model": [None, {}]},
    ),
    Change("update_quota", lab_quota, "update", ("quota", "quota for lab"), {"max_gpus": [12, 16]}),
    Change(
        "delete_quota",
        lab_quota,
        "delete",
        ("quota", "quota for lab"),
        {"account": ["lab", None], "max_gpus": [12, None], "max_gpus_per_model": [{}, None]},
    ),
    Change("update_account", no_subject, "update", ("account", "other"), {"shares": [1, 5]}),
    Change(
        "add_member",
        no_subject,
        "create",
        ("membership", "dora in other (member)"),
        {"account": [None, "other"], "is_default": [None, False], "role": [None, "member"], "user": [None, "dora"]},
    ),
    Change(
        "set_role",
        dora_in_other,
        "update",
        ("membership", "dora in other (coordinator)"),
        {"role": ["member", "coordinator"]},
    ),
    Change(
        "remove_member",
        dora_in_other,
        "delete",
        ("membership", "dora in other (member)"),
        {"account": ["other", None], "is_default": [False, None], "role": ["member", None], "user": ["dora", None]},
    ),
    Change(
        "drain",
        up_node,
        "drain",
        ("node", "h100-01"),
        lambda reason: {"reason": ["", reason], "state": ["up", "drain"]},
    ),
    Change(
        "resume", drained_node, "resume", ("node", "h100-01"), {"reason": ["bad fan", ""], "state": ["drain", "up"]}
    ),
]


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__.lower())
@pytest.mark.parametrize("change", CHANGES, ids=lambda change: change.name)
def test_a_change_records_one_audit_entry_whichever_way_it_comes(world, way, change):
    subject = change.given(world)
    via = way(world)
    response = getattr(via, change.name)(subject)
    assert via.ok(response), response.content[:500]
    expected = change.changes(via.drain_reason) if callable(change.changes) else change.changes
    [entry] = AuditEntry.objects.all()
    assert (entry.actor, entry.actor_name, entry.action) == (world.admin, "admin", change.action)
    assert (entry.target_type, entry.target_repr) == change.target
    assert entry.changes == expected


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__.lower())
def test_a_refused_change_records_nothing(world, way):
    response = way(world).refused_quota()  # a borrowing limit without a guarantee
    assert response.status_code == way.refused_status
    assert not Quota.objects.exists() and not AuditEntry.objects.exists()
