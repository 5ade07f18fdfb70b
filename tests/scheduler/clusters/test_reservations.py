"""Reservations and maintenance windows through the portal (``scontrol create
reservation``): staff make them in the API (audited), the tick keeps jobs out of them or
runs a reservation's jobs inside it, submit refuses what cannot run in one, and on Slurm
the reservation is made in Slurm too and a reservation's jobs are submitted into it."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from people.models import AuditEntry
from scheduler.choices import JobState
from scheduler.clusters.reservations import delete_reservation, save_reservation
from scheduler.jobs.remote import cancel_remote
from scheduler.models import Job, Node, Reservation
from tests import slurm_dev
from tests.builders import submit
from tests.scheduler.clusters.test_slurm_cluster import slurm_cluster  # noqa: F401  (fixture)
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db

HOUR = 3600


def window(name: str, kind: str, nodes: list[str], in_h: float, for_h: float, **people: Any) -> Reservation:
    start = timezone.now() + timedelta(hours=in_h)
    return save_reservation(
        "test",
        None,
        name=name,
        kind=kind,
        start_at=start,
        end_at=start + timedelta(hours=for_h),
        nodes=Node.objects.filter(name__in=nodes),
        **people,
    )


def body(**changes: Any) -> dict[str, Any]:
    """A maintenance window's body in two hours, changed by ``changes`` (None: left out)."""
    start = timezone.now() + timedelta(hours=2)
    base = {
        "name": "fw-upgrade",
        "kind": "maintenance",
        "start_at": start.isoformat(),
        "end_at": (start + timedelta(hours=4)).isoformat(),
        "nodes": ["h100-01"],
    } | changes
    return {key: value for key, value in base.items() if value is not None}


# --- The API -----------------------------------------------------------------------------------


def test_staff_make_a_maintenance_window_everyone_reads_it_and_it_is_audited(world, client_for):
    response = client_for(world.admin).post("/api/v1/reservations/", body(), format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["nodes"], response.json()["active"]) == (["h100-01"], False)
    assert AuditEntry.objects.filter(action="reserve").count() == 1
    listed = client_for(world.alice).get("/api/v1/reservations/").json()["results"]
    assert [r["name"] for r in listed] == ["fw-upgrade"]
    assert client_for(world.alice).post("/api/v1/reservations/", body(name="mine"), format="json").status_code == 403
    pk = response.json()["id"]
    assert (
        client_for(world.admin)
        .patch(f"/api/v1/reservations/{pk}/", {"nodes": ["h100-01", "h100-02"]}, format="json")
        .status_code
        == 200
    )
    assert AuditEntry.objects.filter(action="change reservation").count() == 1
    assert client_for(world.admin).delete(f"/api/v1/reservations/{pk}/").status_code == 204
    assert not Reservation.objects.exists() and AuditEntry.objects.filter(action="delete reservation").exists()


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"end_at": (timezone.now() - timedelta(hours=1)).isoformat()}, "end_at"),
        ({"nodes": []}, "nodes"),
        ({"nodes": ["no-such-node"]}, "nodes"),
        ({"accounts": ["lab"]}, "accounts"),  # maintenance is for no one
        ({"kind": "accounts"}, "accounts"),  # ... and a reservation for someone
        ({"kind": "sometimes"}, "kind"),
        ({"name": "has spaces"}, "name"),
        ({"flags": "MAINT"}, "flags"),
    ],
)
def test_a_bad_reservation_is_a_400_naming_the_field(world, client_for, changes, field):
    response = client_for(world.admin).post("/api/v1/reservations/", body(**changes), format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Reservation.objects.exists()


# --- The tick ----------------------------------------------------------------------------------


def test_a_job_that_would_run_into_maintenance_goes_elsewhere_or_waits_saying_why(world, tick):
    window("fw", "maintenance", ["h100-01"], in_h=1, for_h=4)
    long = submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2 * HOUR)
    tick()
    long.refresh_from_db()
    assert long.allocations[0]["node"] == "h100-02"
    window("fw2", "maintenance", ["h100-02"], in_h=1, for_h=4)
    second = submit(world.bob, world.lab, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2 * HOUR)
    short = submit(world.bob, world.lab, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=HOUR // 2)
    tick()
    second.refresh_from_db()
    short.refresh_from_db()
    assert short.state != JobState.PENDING and short.allocations[0]["node"] == "h100-01"  # ends before the window
    assert second.state == JobState.PENDING and second.pending_reason == "ReqNodeNotAvail"
    assert "reserved for maintenance from" in second.pending_blockers[0]["message"]


def test_a_reservations_jobs_run_inside_it_and_others_are_kept_out(world, client_for, tick):
    window("lab-demo", "accounts", ["h100-01"], in_h=-0.5, for_h=3, accounts=[world.lab])
    theirs = submit(world.charlie, world.other, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=HOUR)
    response = client_for(world.alice).post(
        "/api/v1/jobs/",
        {
            "name": "demo",
            "account": "lab",
            "command": "demo",
            "gpus_per_node": 8,
            "walltime_seconds": HOUR,
            "reservation": "lab-demo",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    tick()
    ours = Job.objects.get(pk=response.json()["id"])
    theirs.refresh_from_db()
    assert ours.allocations[0]["node"] == "h100-01" and theirs.allocations[0]["node"] == "h100-02"


@pytest.mark.parametrize(
    "who,reservation,walltime,fragment",
    [
        ("charlie", "lab-demo", HOUR, "is not for you or account 'other'"),
        ("alice", "nope", HOUR, "There is no reservation 'nope'"),
        ("alice", "lab-demo", 4 * HOUR, "must fit inside it"),
        ("alice", "fw", HOUR, "is a maintenance window"),
        ("alice", "has space", HOUR, "letters, digits"),
    ],
)
def test_submit_refuses_a_reservation_the_job_cannot_run_in(world, client_for, who, reservation, walltime, fragment):
    window("lab-demo", "accounts", ["h100-01"], in_h=-0.5, for_h=3, accounts=[world.lab])
    window("fw", "maintenance", ["h100-02"], in_h=1, for_h=3)
    account = "other" if who == "charlie" else "lab"
    response = client_for(getattr(world, who)).post(
        "/api/v1/jobs/",
        {"name": "x", "account": account, "command": "x", "walltime_seconds": walltime, "reservation": reservation},
        format="json",
    )
    assert response.status_code == 400 and fragment in response.json()["reservation"][0], response.json()
    assert not Job.objects.exists()


# --- Slurm -------------------------------------------------------------------------------------


def scontrol_show(*args: str) -> str:
    env = {**os.environ, "SLURM_CONF": slurm_dev.slurm_conf()}
    done = subprocess.run(["scontrol", "show", *args], env=env, capture_output=True, text=True, timeout=30)
    return done.stdout + done.stderr


def reservation_active_in_slurm(name: str) -> bool:
    """Whether Slurm holds reservation ``name`` now (``scontrol show res`` lists one that
    ended until it purges it; ``sinfo -T`` lists the active ones)."""
    env = {**os.environ, "SLURM_CONF": slurm_dev.slurm_conf()}
    done = subprocess.run(["sinfo", "-h", "-T"], env=env, capture_output=True, text=True, timeout=30, check=True)
    return any(line.split()[:2] == [name, "ACTIVE"] for line in done.stdout.splitlines())


@pytest.mark.slurm
def test_a_maintenance_window_is_made_in_slurm_and_deleted_with_it(slurm_cluster, django_capture_on_commit_callbacks):  # noqa: F811
    with django_capture_on_commit_callbacks(execute=True):  # Slurm is told after commit
        made = window("fw-test", "maintenance", ["node4"], in_h=2, for_h=1)
    shown = scontrol_show("reservation", "qm-fw-test")
    assert "Nodes=node4" in shown and "MAINT" in shown, shown
    with django_capture_on_commit_callbacks(execute=True):
        delete_reservation("test", made)
    assert "qm-fw-test" not in scontrol_show("reservation")


@pytest.mark.slurm
def test_a_reservations_job_runs_in_slurms_reservation(world, slurm_cluster, tick, django_capture_on_commit_callbacks):  # noqa: F811
    with django_capture_on_commit_callbacks(execute=True):
        made = window("lab-slurm", "accounts", ["node3"], in_h=-0.1, for_h=2, accounts=[world.lab])
    try:
        job = submit(world.alice, world.lab, command="sleep 30", gpus_per_node=1, walltime_seconds=600)
        Job.objects.filter(pk=job.pk).update(reservation="lab-slurm")
        tick()
        job.refresh_from_db()
        assert job.state == JobState.RUNNING and job.allocations[0]["node"] == "node3"
        assert "Reservation=qm-lab-slurm" in scontrol_show("job", job.external_id)
        assert reservation_active_in_slurm("qm-lab-slurm")
        with django_capture_on_commit_callbacks(execute=True):  # Slurm will not delete it while the job runs:
            delete_reservation("test", made)  # it ends it now instead
        wait_for(lambda: not reservation_active_in_slurm("qm-lab-slurm"), what="Slurm to end the reservation")
    finally:
        cancel_remote(job.id)
        with django_capture_on_commit_callbacks(execute=True):
            if Reservation.objects.filter(pk=made.pk).exists():
                delete_reservation("test", made)


def test_the_what_if_plans_a_job_after_a_maintenance_window_and_names_it(world, client_for):
    made = window("fw", "maintenance", ["h100-01", "h100-02"], in_h=1, for_h=4)
    body = {
        "name": "x", "account": "lab", "command": "x", "gpus_per_node": 8, "gpu_model": "H100-80GB",
        "walltime_seconds": 2 * HOUR,
    }  # fmt: skip
    answer = client_for(world.alice).post("/api/v1/jobs/estimate/", body, format="json").json()
    assert answer["would_start_now"] is False and answer["pending_reason"] == "ReqNodeNotAvail"
    assert datetime.fromisoformat(answer["estimated_start"]) == made.end_at
    assert "reserved for maintenance from" in answer["blockers"][0]["message"]
    assert "reserved for maintenance" in answer["reasons"][0]


def test_a_reservation_of_gpus_of_a_model_takes_the_least_busy_nodes_that_hold_them(world, client_for, tick):
    submit(world.charlie, world.other, gpus_per_node=2, gpu_model="H100-80GB")
    tick()  # h100-01 now runs a job: h100-02 is the idler
    client = client_for(world.admin)
    response = client.post(
        "/api/v1/reservations/", body(name="eight", gpus=8, gpu_model="H100-80GB", nodes=None), format="json"
    )
    assert response.status_code == 201, response.json()
    assert (response.json()["nodes"], response.json()["gpus"]) == (["h100-02"], 8)
    more = client.post(
        "/api/v1/reservations/", body(name="more", gpus=9, gpu_model="H100-80GB", nodes=None), format="json"
    )
    assert more.status_code == 400 and "Only 8 GPUs of H100-80GB" in more.json()["gpus"][0]  # h100-02 is taken
    both = client.post("/api/v1/reservations/", body(name="both", gpus=4, gpu_model="L4"), format="json")
    assert both.status_code == 400 and "not both" in both.json()["nodes"][0]
