"""Which QOS an account's jobs may use (Slurm's association QOS list and default QOS)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.db import transaction

from people.access import usable_qos
from people.models import Account, AuditEntry, Qos
from scheduler.models import Job

pytestmark = pytest.mark.django_db

JOB = {"name": "train", "command": "true", "walltime_seconds": 600, "gpus_per_node": 1}


@pytest.fixture
def qos(world: Any) -> dict[str, Qos]:
    return {name: Qos.objects.create(name=name, priority=p) for name, p in (("low", 0), ("normal", 10), ("high", 100))}


def submit(client: Any, **fields: Any) -> Any:
    return client.post("/api/v1/jobs/", {**JOB, **fields}, format="json")


def test_with_no_list_anywhere_an_account_gets_only_the_sites_default_qos(world, qos, client_for):
    alice = client_for(world.alice)

    refused = submit(alice, qos="high")
    assert refused.status_code == 400
    assert refused.json()["qos"] == ["Account 'lab' may not use QOS 'high' (it may use: normal)."]
    assert Job.objects.get(pk=submit(alice).json()["id"]).qos == qos["normal"]


def test_an_accounts_list_is_inherited_by_its_children_and_its_default_is_used(world, qos, client_for):
    parent = Account.objects.create(name="ai")
    parent.allowed_qos.set([qos["low"], qos["high"]])
    parent.default_qos = qos["low"]
    parent.save()
    world.lab.parent = parent
    world.lab.save()
    alice = client_for(world.alice)

    assert submit(alice, qos="high").status_code == 201
    assert submit(alice, qos="normal").json()["qos"] == [
        "Account 'lab' may not use QOS 'normal' (it may use: high, low)."
    ]
    assert Job.objects.get(pk=submit(alice).json()["id"]).qos == qos["low"]
    world.lab.allowed_qos.set([qos["normal"]])  # its own list wins over the parent's
    assert submit(alice, qos="high").status_code == 400


def test_staff_may_use_any_qos(world, qos, client_for):
    from people.models import Membership

    Membership.objects.create(user=world.admin, account=world.lab)
    assert submit(client_for(world.admin), account="lab", qos="high").status_code == 201


def test_staff_set_an_accounts_qos_over_the_api_and_it_is_audited(world, qos, client_for):
    admin = client_for(world.admin)
    url = f"/api/v1/accounts/{world.lab.pk}/"

    changed = admin.patch(url, {"allowed_qos": ["normal", "high"], "default_qos": "normal"}, format="json")

    assert changed.status_code == 200, changed.json()
    assert (sorted(changed.json()["allowed_qos"]), changed.json()["default_qos"]) == (["high", "normal"], "normal")
    entry = AuditEntry.objects.get(target_type="account", action="update")
    assert entry.changes["allowed_qos"] == [[], ["high", "normal"]]
    refused = admin.patch(url, {"default_qos": "low"}, format="json")
    assert refused.status_code == 400 and "not in allowed_qos" in refused.json()["default_qos"][0]
    assert client_for(world.alice).patch(url, {"allowed_qos": ["high"]}, format="json").status_code == 403


def test_the_submit_form_offers_only_the_qos_the_users_accounts_may_use(world, qos, client):
    import re

    def offered() -> list[str]:
        page = client.get("/jobs/new/").content.decode()
        select = re.search(r'<select name="qos"[^>]*>(.*?)</select>', page, re.S)
        assert select is not None
        return re.findall(r'<option value="([^"]*)"', select[1])

    client.force_login(world.alice)
    assert offered() == ["", "normal"]
    world.lab.allowed_qos.set([qos["normal"], qos["high"]])
    assert offered() == ["", "high", "normal"]
    client.force_login(world.admin)
    assert offered() == ["", "high", "low", "normal"]


def walked(account: Account) -> tuple[list[Qos], Qos | None]:
    """The rule as first written: up the tree one account (and one query) at a time."""
    allowed: list[Qos] | None = None
    default: Qos | None = None
    node: Account | None = account
    while node is not None and (allowed is None or default is None):
        if allowed is None:
            allowed = list(node.allowed_qos.all()) or None
        if default is None and node.default_qos_id is not None:
            default = node.default_qos
        node = node.parent
    site = Qos.objects.filter(name="normal").first()
    if allowed is None:
        allowed = [site] if site is not None else []
    if default is None or default not in allowed:
        default = site if site in allowed else (allowed[0] if allowed else None)
    return allowed, default


def test_one_query_answers_as_walking_the_tree_one_account_at_a_time(db, django_assert_num_queries):
    rng = random.Random(7)
    for case in range(150):
        with transaction.atomic():
            names = rng.sample(["low", "normal", "high", "debug"], rng.randint(0, 4))
            qos = [Qos.objects.create(name=name, priority=rng.randint(0, 9)) for name in names]
            accounts: list[Account] = []
            for i in range(rng.randint(1, 6)):
                account = Account.objects.create(
                    name=f"a{i}", parent=rng.choice([None, *accounts]), default_qos=rng.choice([None, *qos])
                )
                account.allowed_qos.set(rng.sample(qos, rng.randint(0, len(qos))))
                accounts.append(account)
            for account in accounts:
                with django_assert_num_queries(1):
                    answer = usable_qos(account)
                assert answer == walked(account), f"case {case}, account {account.name}"
            transaction.set_rollback(True)
