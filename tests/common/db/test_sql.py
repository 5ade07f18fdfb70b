"""Hand-written SQL (``common.db.sql``) reads and writes rows as the ORM does: rows read
are the instances ``select_related`` gives (every field converted alike: aware
datetimes, JSON, decimals, UUIDs; related objects cached, so reading them costs no
query; a missing one-to-one None), and a row inserted is the row ``Model.save`` writes."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from common.db.sql import Inserts, JoinedRows, prepared_cursor
from people.models import ApiToken, ClusterIdentity
from people.services import create_api_token
from scheduler.models import Job, JobEvent
from tests.builders import submit

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


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


def test_an_inserted_job_is_the_row_the_orm_would_have_written(world, django_assert_num_queries):
    fields = {
        "owner": world.alice,
        "account": world.lab,
        "name": "sweep",
        "command": "python train.py",
        "env": {"SEED": "3"},
        "node_labels": {"rack": "r2"},
        "cpus_per_node": Decimal("2.5"),
        "walltime_seconds": 600,
        "submitted_at": DAY,
    }
    by_orm = Job.objects.create(**fields)

    with django_assert_num_queries(1):
        inserted = Inserts(Job).save(Job(**fields))

    assert inserted.pk is not None and inserted.pk != by_orm.pk
    assert not inserted._state.adding
    ours, theirs = values(Job.objects.get(pk=inserted.pk)), values(Job.objects.get(pk=by_orm.pk))
    assert ours is not None and theirs is not None
    different = {k for k in ours if ours[k] != theirs[k]}
    assert different <= {"id", "uuid", "updated_at"}  # its own key, uuid and the time it was written
    assert ours["updated_at"] is not None  # pre_save ran: auto_now set it


def test_an_inserted_event_is_read_back_whole(world):
    job = submit(world.alice, world.lab)
    event = Inserts(JobEvent).save(JobEvent(job=job, at=DAY, kind="note", message="hello", data={"tasks": [1, 2]}))

    assert values(JobEvent.objects.get(pk=event.pk)) == values(event)


def test_a_job_and_its_event_are_inserted_together_in_one_statement_on_postgresql(world, django_assert_num_queries):
    job = Job(owner=world.alice, account=world.lab, name="t", command="true", walltime_seconds=60, submitted_at=DAY)
    event = JobEvent(at=DAY, kind="submitted", message="submitted by alice", data={"total_gpus": 1})

    with django_assert_num_queries(1 if connection.vendor == "postgresql" else 2):
        saved = Inserts(Job).save_with(job, Inserts(JobEvent), event, "job")

    assert saved is job and job.pk is not None and not job._state.adding
    assert Job.objects.filter(pk=job.pk).exists()
    stored = JobEvent.objects.get(job_id=job.pk)
    assert (stored.at, stored.kind, stored.message, stored.data) == (
        DAY,
        "submitted",
        "submitted by alice",
        {"total_gpus": 1},
    )


def test_a_follower_must_point_at_the_inserted_model(world):
    with pytest.raises(TypeError, match=r"JobEvent\.kind is no foreign key to Job"):
        Inserts(Job).save_with(Job(), Inserts(JobEvent), JobEvent(), "kind")


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.postgres
def test_the_hot_statements_are_prepared_once_per_connection_and_djangos_own_never(world):
    create_api_token(world.alice, "laptop")
    tokens = JoinedRows(ApiToken, "user")

    for _ in range(3):
        assert len(tokens.read("t0.revoked_at IS NULL")) == 1
        list(ApiToken.objects.filter(revoked_at__isnull=True))

    ours = [sql for sql in prepared_statements() if "FROM" in sql and "portal_apitoken" in sql]
    assert len(ours) == 1  # the one read, prepared once, run three times
    assert "t0.revoked_at IS NULL" in ours[0]


@pytest.mark.postgres
def test_a_prepared_statement_is_logged_and_counted_as_any_other(world):
    with CaptureQueriesContext(connection) as queries:
        for _ in range(2):  # prepared by the first, run by name by the second
            with prepared_cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM auth_user WHERE username = %s", ["alice"])
                assert cursor.fetchone()[0] == 1

    assert [q["sql"] for q in queries.captured_queries] == ["SELECT COUNT(*) FROM auth_user WHERE username = $1"] * 2


def test_a_prepared_cursor_runs_statements_with_values_on_any_database(world):
    with prepared_cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM auth_user WHERE username = %s", ["alice"])
        assert cursor.fetchone()[0] == 1
