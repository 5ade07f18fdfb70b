"""GPU-hours over a period (GET /api/v1/usage/, ``sreport``): each attempt that held GPUs,
ended or running, clipped to the period; sums equal to the attempts' own figures; the
billing weights the fair-share uses; who may see whose."""

from __future__ import annotations

import csv
import io
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from monitoring.models import JobEfficiency
from people.models import Qos
from scheduler.choices import JobState
from scheduler.models import Job, JobAttempt
from tests.builders import make_account, run_attempt, submit

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 10, tzinfo=UTC)


def get(client, **params):
    response = client.get("/api/v1/usage/", params)
    assert response.status_code == 200, response.content
    return {row["group"]: row for row in response.json()["rows"]}


def test_ended_and_running_attempts_are_clipped_to_the_period(world, client_for):
    early = submit(world.alice, world.lab, gpus_per_node=2)
    run_attempt(early, DAY - timedelta(hours=2), DAY + timedelta(hours=3), gpus=2)  # 3 h inside the day, 2 GPUs
    running = submit(world.bob, world.lab)
    with time_machine.travel(DAY + timedelta(hours=10), tick=False):
        run_attempt(running, DAY + timedelta(hours=4), None)  # 6 h so far
        rows = get(client_for(world.admin), start="2026-03-10", end="2026-03-10", group_by="user")
    assert rows["alice"]["gpu_hours"] == pytest.approx(6.0) and rows["bob"]["gpu_hours"] == pytest.approx(6.0)


def test_a_requeued_job_counts_every_attempt(world, client_for):
    job = submit(world.alice, world.lab)
    run_attempt(job, DAY, DAY + timedelta(hours=1))
    Job.objects.filter(pk=job.pk).update(attempt=1, state=JobState.PENDING, started_at=None, ended_at=None)
    run_attempt(job, DAY + timedelta(hours=2), DAY + timedelta(hours=5))
    assert JobAttempt.objects.filter(job=job).count() == 2
    rows = get(client_for(world.alice), start="2026-03-10", end="2026-03-10")
    assert rows["lab"]["gpu_hours"] == pytest.approx(4.0) and rows["lab"]["attempts"] == 2


def test_sums_equal_the_attempts_own_figures_for_every_grouping(world, client_for, settings):
    settings.SCHEDULER_BILLING_WEIGHTS = {"H100-80GB": 2.0, "L4": 0.5}
    Qos.objects.update_or_create(name="low", defaults={"usage_factor": 0.5})
    Qos.objects.get_or_create(name="normal")
    rng = random.Random(7)
    people = [(world.alice, world.lab), (world.bob, world.lab), (world.charlie, world.other)]
    for _ in range(40):
        owner, account = rng.choice(people)
        node, gpus = rng.choice([("h100-01", 1), ("h100-02", 4), ("l4-01", 2)])
        qos = Qos.objects.get(name=rng.choice(["normal", "low"]))
        job = submit(owner, account, gpus_per_node=gpus, qos=qos)
        start = DAY + timedelta(minutes=rng.randrange(-600, 3000))
        run_attempt(job, start, start + timedelta(minutes=rng.randrange(1, 900)), node=node, gpus=gpus)
    period = (DAY, DAY + timedelta(days=2))
    expected: dict[str, dict[str, list[float]]] = {
        g: defaultdict(lambda: [0.0, 0.0]) for g in ("account", "user", "gpu_model", "qos")
    }
    weights = {"H100-80GB": 2.0, "L4": 0.5}
    for a in JobAttempt.objects.select_related("account", "owner"):
        seconds = max(0.0, (min(period[1], a.ended_at) - max(period[0], a.started_at)).total_seconds())
        if not seconds:
            continue
        factor = weights.get(a.gpu_model, 1.0) * (0.5 if a.qos == "low" else 1.0)
        for group, key in (
            ("account", a.account.name),
            ("user", a.owner.username),
            ("gpu_model", a.gpu_model),
            ("qos", a.qos),
        ):
            expected[group][key][0] += a.gpus * seconds / 3600
            expected[group][key][1] += a.gpus * factor * seconds / 3600
    client = client_for(world.admin)
    for group, sums in expected.items():
        rows = get(client, start="2026-03-10", end="2026-03-11", group_by=group)
        assert set(rows) == set(sums)
        for key, (raw, billed) in sums.items():
            assert rows[key]["gpu_hours"] == pytest.approx(raw, rel=1e-12)
            assert rows[key]["billed_gpu_hours"] == pytest.approx(billed, rel=1e-12)


def test_researchers_see_their_own_coordinators_their_accounts_staff_everything(world, client_for):
    for owner, account in ((world.alice, world.lab), (world.bob, world.lab), (world.charlie, world.other)):
        run_attempt(submit(owner, account), DAY, DAY + timedelta(hours=1))
    period = {"start": "2026-03-10", "end": "2026-03-10", "group_by": "user"}
    assert set(get(client_for(world.alice), **period)) == {"alice"}
    assert set(get(client_for(world.bob), **period)) == {"alice", "bob"}  # bob coordinates lab
    assert set(get(client_for(world.admin), **period)) == {"alice", "bob", "charlie"}
    assert set(get(client_for(world.alice), **period, user="charlie")) == set()


def test_an_account_filter_takes_its_subtree(world, client_for):
    child = make_account("lab-vision", parent=world.lab)
    run_attempt(submit(world.admin, child), DAY, DAY + timedelta(hours=2))
    run_attempt(submit(world.charlie, world.other), DAY, DAY + timedelta(hours=1))
    rows = get(client_for(world.admin), start="2026-03-10", end="2026-03-10", account="lab")
    assert set(rows) == {"lab-vision"}


def test_csv_has_a_header_and_a_row_per_group(world, client_for):
    run_attempt(submit(world.alice, world.lab), DAY, DAY + timedelta(hours=1))
    response = client_for(world.alice).get(
        "/api/v1/usage/", {"start": "2026-03-10", "end": "2026-03-10", "output": "csv"}
    )
    assert response["Content-Type"] == "text/csv"
    assert list(csv.reader(io.StringIO(response.content.decode()))) == [
        [
            "account",
            "attempts",
            "gpu_hours",
            "billed_gpu_hours",
            "used_gpu_hours",
            "idle_gpu_hours",
            "unmeasured_gpu_hours",
            "efficiency_pct",
        ],
        ["lab", "1", "1.000000", "1.000000", "0.000000", "0.000000", "1.000000", ""],
    ]


# --- Utilization-weighted chargeback ------------------------------------------------------


def measured(job, util: float | None, samples: int = 100, attempt: int | None = None) -> None:
    """The efficiency pass's figures for ``job``'s attempt (``util`` None: no samples)."""
    JobEfficiency.objects.create(
        job=job,
        attempt=job.attempt if attempt is None else attempt,
        gpu_hours=0,
        elapsed_seconds=0,
        samples=samples if util is not None else 0,
        gpu_util_mean=util,
        computed_at=DAY,
    )


def test_measured_hours_split_into_used_and_idle_and_unmeasured_ones_stay_apart(world, client_for):
    busy = submit(world.alice, world.lab, gpus_per_node=2)
    run_attempt(busy, DAY, DAY + timedelta(hours=3), gpus=2)  # 6 GPU-hours at 75%
    measured(busy, 75.0)
    dark = submit(world.alice, world.lab)
    run_attempt(dark, DAY, DAY + timedelta(hours=4))  # 4 GPU-hours, no agent reported
    measured(dark, None)
    (row,) = get(client_for(world.alice), start="2026-03-10", end="2026-03-10").values()
    assert (row["gpu_hours"], row["used_gpu_hours"], row["idle_gpu_hours"], row["unmeasured_gpu_hours"]) == (
        pytest.approx(10.0),
        pytest.approx(4.5),
        pytest.approx(1.5),
        pytest.approx(4.0),
    )
    assert row["efficiency_pct"] == pytest.approx(75.0)  # of what was measured, not of 10 GPU-hours


def test_a_group_with_nothing_measured_has_no_efficiency_rather_than_0_or_100(world, client_for):
    run_attempt(submit(world.alice, world.lab), DAY, DAY + timedelta(hours=1))
    (row,) = get(client_for(world.alice), start="2026-03-10", end="2026-03-10").values()
    assert row["efficiency_pct"] is None and row["unmeasured_gpu_hours"] == pytest.approx(1.0)


def test_chargeback_sums_equal_the_attempts_own_figures(world, client_for):
    """Random attempts, some measured, some without samples, some requeued (the
    efficiency is of the last attempt only: the earlier one is unmeasured)."""
    rng = random.Random(11)
    people = [(world.alice, world.lab), (world.bob, world.lab), (world.charlie, world.other)]
    utilization: dict[tuple[int, int], float] = {}
    for _ in range(30):
        owner, account = rng.choice(people)
        gpus = rng.choice([1, 2, 4])
        job = submit(owner, account, gpus_per_node=gpus)
        start = DAY + timedelta(minutes=rng.randrange(-600, 2000))
        run_attempt(job, start, start + timedelta(minutes=rng.randrange(1, 900)), gpus=gpus)
        if rng.random() < 0.3:  # requeued, ran again
            Job.objects.filter(pk=job.pk).update(attempt=1, state=JobState.PENDING, started_at=None, ended_at=None)
            job.refresh_from_db()
            again = start + timedelta(hours=16)
            run_attempt(job, again, again + timedelta(minutes=rng.randrange(1, 300)), gpus=gpus)
        kind = rng.random()
        if kind < 0.6:
            util = rng.uniform(0, 100)
            measured(job, util)
            utilization[job.id, job.attempt] = util
        elif kind < 0.8:
            measured(job, None)
    period = (DAY, DAY + timedelta(days=2))
    expected: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # hours, used, unmeasured
    for a in JobAttempt.objects.select_related("owner"):
        seconds = max(0.0, (min(period[1], a.ended_at) - max(period[0], a.started_at)).total_seconds())
        hours = a.gpus * seconds / 3600
        sums = expected[a.owner.username]
        sums[0] += hours
        if (a.job_id, a.attempt) in utilization:
            sums[1] += hours * utilization[a.job_id, a.attempt] / 100
        else:
            sums[2] += hours
    rows = get(client_for(world.admin), start="2026-03-10", end="2026-03-11", group_by="user")
    for user, (hours, used, unmeasured) in expected.items():
        row = rows[user]
        assert row["gpu_hours"] == pytest.approx(hours, rel=1e-12)
        assert row["used_gpu_hours"] == pytest.approx(used, rel=1e-9, abs=1e-9)
        assert row["unmeasured_gpu_hours"] == pytest.approx(unmeasured, rel=1e-9, abs=1e-9)
        assert row["idle_gpu_hours"] == pytest.approx(hours - unmeasured - used, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "2026-03-11", "end": "2026-03-10"}, "start"),
        ({"start": "2024-01-01", "end": "2026-03-10"}, "start"),
        ({"group_by": "colour"}, "group_by"),
        ({"account": "nope"}, "account"),
        ({"strat": "2026-03-10"}, "strat"),
        ({"start": "yesterday"}, "start"),
    ],
)
def test_a_bad_question_is_a_400_naming_the_field(world, client_for, params, field):
    response = client_for(world.alice).get("/api/v1/usage/", params)
    assert response.status_code == 400 and field in response.json()
