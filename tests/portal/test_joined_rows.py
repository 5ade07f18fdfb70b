"""Rows read with hand-written SQL (``portal.sql.JoinedRows``) are the instances the ORM's
``select_related`` gives: every field converted alike (aware datetimes, JSON, decimals,
UUIDs), related objects cached (reading them costs no query), a missing one-to-one None."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Model

from portal.models import ApiToken, ClusterIdentity
from portal.services import create_api_token
from portal.sql import JoinedRows
from scheduler.models import Job
from tests.builders import submit

pytestmark = pytest.mark.django_db


def values(instance: Model | None) -> dict[str, Any] | None:
    if instance is None:
        return None
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_a_token_reads_with_its_user_and_identity_as_select_related_reads_them(world, django_assert_num_queries):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=5001, gid=5001)
    create_api_token(world.alice, "laptop")
    create_api_token(world.bob, "ci", read_only=True)
    tokens = JoinedRows(ApiToken, "user", "user__cluster_identity")

    with django_assert_num_queries(1):
        read = tokens.read("t0.revoked_at IS NULL", tail="ORDER BY t0.id")
    by_orm = list(ApiToken.objects.select_related("user__cluster_identity").order_by("id"))

    assert [values(t) for t in read] == [values(t) for t in by_orm]
    with django_assert_num_queries(0):
        assert [values(t.user) for t in read] == [values(t.user) for t in by_orm]
        assert values(read[0].user.cluster_identity) == values(by_orm[0].user.cluster_identity)
        assert getattr(read[1].user, "cluster_identity", None) is None  # bob has none: no query, no error
    assert read[0].created_at.tzinfo is not None


def test_a_job_reads_with_json_decimal_and_uuid_fields_as_the_orm_reads_them(world, django_assert_num_queries):
    job = submit(world.alice, world.lab, env={"A": "1"}, node_labels={"rack": "r1"}, cpus_per_node=Decimal("0.5"))
    without_qos = JoinedRows(Job, "account", "qos", "owner")

    with django_assert_num_queries(1):
        (read,) = without_qos.read("t0.id = %s", [job.pk])
    by_orm = Job.objects.select_related("account", "qos", "owner").get(pk=job.pk)

    assert values(read) == values(by_orm)
    assert (read.env, read.cpus_per_node, read.uuid) == ({"A": "1"}, Decimal("0.5"), by_orm.uuid)
    with django_assert_num_queries(0):
        assert (read.account.name, read.qos, read.owner.username) == ("lab", None, "alice")


def test_only_single_related_objects_can_be_joined():
    with pytest.raises(ValueError, match="not a single related object"):
        JoinedRows(Job, "events")
    with pytest.raises(ValueError, match="before it"):
        JoinedRows(ApiToken, "user__cluster_identity")
