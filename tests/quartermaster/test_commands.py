"""Management commands: the demo seed and one pass of the scheduler loop."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from people.models import Account, Membership
from scheduler.backends.base import BackendError
from scheduler.backends.local import LocalBackend
from scheduler.jobs.remote import backend_for
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Cluster, Gpu, Job, JobAttempt, Node
from scheduler.tick.run import run_tick
from tests.builders import local_node_group, make_local_cluster

pytestmark = pytest.mark.django_db


def test_seed_demo_builds_the_demo_world_and_is_idempotent():
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert "alice" in out.getvalue() and "Demo logins" in out.getvalue()
    assert Node.objects.filter(cluster__name="demo").count() == 10
    assert Gpu.objects.filter(node__name="h100-01").count() == 8
    assert Gpu.objects.filter(node__name="a100-04", parent__isnull=False, mig_profile="3g.20gb").count() == 16
    assert Account.objects.filter(name="nlp", parent__name="ai-research").exists()
    assert Membership.objects.get(user__username="bob", account__name="nlp").role == "coordinator"
    assert Job.objects.filter(state="PENDING").count() == 4  # the demo jobs, and a week of history:
    history = Job.objects.filter(state="COMPLETED")
    assert history.count() == 240 and JobAttempt.objects.count() == 240 and "240 finished jobs" in out.getvalue()

    again = io.StringIO()
    call_command("seed_demo", stdout=again)
    # A restart lists who can log in (not their passwords, shown only when made) and how to get new ones.
    assert "Demo logins: admin, alice" in again.getvalue() and "--reset-passwords" in again.getvalue()
    assert (Node.objects.count(), Job.objects.count(), Cluster.objects.count()) == (10, 244, 1)


def test_seed_demo_says_what_isolation_the_demo_jobs_have():
    """In the local backend's own words: without bubblewrap as root, jobs run as their
    owner's uid unsandboxed (not "as this user"), and the demo says so loudly."""
    out = io.StringIO()
    call_command("seed_demo", stdout=out)

    backend = backend_for(Cluster.objects.get(name="demo"))
    assert isinstance(backend, LocalBackend)
    assert backend.isolation in out.getvalue()
    if not backend.sandbox:
        assert "WARNING: job isolation: no sandbox" in out.getvalue()
        assert "without filesystem isolation" in out.getvalue() and "single-user" in out.getvalue()


def test_seed_demo_gives_the_demo_cluster_the_apps_env_that_make_apps_built(tmp_path):
    built = tmp_path / "apps-env"
    (built / "bin").mkdir(parents=True)
    out = io.StringIO()

    call_command("seed_demo", "--no-jobs", "--apps-env", str(built), stdout=out)

    demo = Cluster.objects.get(name="demo")
    backend = backend_for(demo)
    assert isinstance(backend, LocalBackend)
    assert demo.config["apps_env"] == str(built) and backend.apps_env == str(built)
    assert f"sessions on 'demo' run the apps of {built}" in out.getvalue()
    demo.config = {**demo.config, "apps_env": "/opt/site/apps-env"}  # an admin's own choice stays
    demo.save()
    call_command("seed_demo", "--no-jobs", "--apps-env", str(built), stdout=io.StringIO())
    assert Cluster.objects.get(name="demo").config["apps_env"] == "/opt/site/apps-env"


def test_seed_demo_without_a_built_apps_env_says_how_to_build_it(tmp_path):
    out = io.StringIO()

    call_command("seed_demo", "--no-jobs", "--apps-env", str(tmp_path / "not-built"), stdout=out)

    assert "apps_env" not in Cluster.objects.get(name="demo").config
    assert "is not built (make apps)" in out.getvalue()


def test_seed_demo_gives_its_users_addresses_that_reach_no_one_and_keeps_one_a_user_set():
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    call_command("seed_demo", stdout=io.StringIO())
    assert dict(users.values_list("username", "email")) == {
        "admin": "admin@demo.invalid",
        "alice": "alice@demo.invalid",
        "bob": "bob@demo.invalid",
    }
    users.filter(username="alice").update(email="")  # seeded before demo users had addresses
    users.filter(username="bob").update(email="bob@lab.example")  # set on his profile

    call_command("seed_demo", stdout=io.StringIO())

    assert users.get(username="alice").email == "alice@demo.invalid"
    assert users.get(username="bob").email == "bob@lab.example"


@pytest.mark.parametrize(
    ("environ", "backend"),
    [
        ({}, "django.core.mail.backends.filebased.EmailBackend"),
        ({"EMAIL_BACKEND": ""}, "django.core.mail.backends.filebased.EmailBackend"),
        (
            {"EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend"},
            "django.core.mail.backends.smtp.EmailBackend",
        ),
    ],
    ids=["unset", "empty", "chosen"],
)
def test_the_demos_mail_goes_to_files_unless_the_environment_names_a_backend(environ, backend):
    from quartermaster.management.commands.run_demo import demo_environment

    children = demo_environment({"PATH": "/usr/bin", **environ})

    assert children["EMAIL_BACKEND"] == backend and children["PATH"] == "/usr/bin"


def test_seeded_demo_jobs_can_all_start(django_capture_on_commit_callbacks):
    call_command("seed_demo", stdout=io.StringIO())
    Cluster.objects.filter(name="demo").update(config={**Cluster.objects.get().config, "simulate": 60})
    with django_capture_on_commit_callbacks(execute=True):
        result = run_tick()
    assert len(result.started) == 4
    assert set(Job.objects.exclude(state="COMPLETED").values_list("state", flat=True)) == {"RUNNING"}


def test_run_scheduler_once_syncs_and_schedules(world, django_capture_on_commit_callbacks):
    from tests.builders import submit

    job = submit(world.alice, world.lab, command="true")
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("run_scheduler", "--once", stdout=out)
    job.refresh_from_db()
    assert job.state == "RUNNING"
    assert "started 1 of 1 pending" in out.getvalue()


def test_run_scheduler_once_also_stores_start_estimates(world, django_capture_on_commit_callbacks):
    from tests.builders import submit

    for _ in range(3):  # two fill the H100 nodes, the third waits
        submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", command="sleep 5")
    with django_capture_on_commit_callbacks(execute=True):
        call_command("run_scheduler", "--once", stdout=io.StringIO())
    waiting = Job.objects.get(state="PENDING")
    assert waiting.estimated_start_at is not None
    for job in Job.objects.filter(state="RUNNING"):
        cancel_job(job, by="test")


def test_run_scheduler_rejects_a_bad_interval(db):
    err = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("run_scheduler", "--interval", "0", stderr=err)
    assert "--interval must be a positive" in err.getvalue()


def test_node_names_must_be_unique_across_clusters(db):
    make_local_cluster("first", [local_node_group("n-01")])
    with pytest.raises(BackendError, match="already belongs to cluster first"):
        make_local_cluster("second", [local_node_group("n-01")])


def test_run_scheduler_rolls_up_the_samples_as_beat_would(world, settings, django_capture_on_commit_callbacks):
    """The embedded mode has no beat: its loop rolls the GPU samples up, so the cluster
    overview's charts of a week (read from hourly rollups) show the demo's telemetry."""
    from datetime import timedelta

    from django.utils import timezone

    from monitoring.models import AllGpuRollup, GpuRollup
    from monitoring.services import record_simulated_samples

    settings.MONITORING_SIMULATE = True
    record_simulated_samples(timezone.now() - timedelta(minutes=2))  # samples of a finished minute
    with django_capture_on_commit_callbacks(execute=True):
        call_command("run_scheduler", "--once", stdout=io.StringIO())
    assert GpuRollup.objects.filter(period=60).exists() and GpuRollup.objects.filter(period=3600).exists()
    assert AllGpuRollup.objects.exists()


def test_the_demos_history_gives_its_pages_and_a_preview_something_to_show(client_for):
    """A week of finished jobs, most of them measured: the GPU-hours page splits used
    from idle, and a preview of a share change moves waits."""
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model
    from django.db.models import F, Q
    from django.utils import timezone

    from monitoring.models import JobEfficiency
    from scheduler.previews import preview

    call_command("seed_demo", stdout=io.StringIO())
    admin = get_user_model().objects.get(username="admin")
    today = datetime.now(UTC).date()
    rows = (
        client_for(admin)
        .get("/api/v1/usage/", {"start": str(today - timedelta(days=8)), "end": str(today), "group_by": "account"})
        .json()["rows"]
    )
    assert {row["group"] for row in rows} == {"nlp", "vision"}
    assert all(row["used_gpu_hours"] > 0 and row["unmeasured_gpu_hours"] > 0 for row in rows)
    # Measured as the monitoring pass measures: every figure (qm show and the job page read them).
    measured = JobEfficiency.objects.filter(samples__gt=0)
    assert (
        measured.exists()
        and not measured.filter(
            Q(gpu_util_peak__isnull=True) | Q(memory_used_peak_mib__isnull=True) | Q(memory_total_mib__isnull=True)
        ).exists()
    )
    assert not measured.filter(gpu_util_peak__lt=F("gpu_util_mean")).exists()
    result = preview("nlp", shares=300, limits=None, days=7, now=timezone.now())
    assert any(row.wait_change_s != 0 for row in result.rows)


def test_the_demos_history_events_carry_their_own_times():
    """Each finished job of the history was submitted, started and ended in the past week;
    its events say so (the job page's timeline), not the moment the demo was seeded."""
    from scheduler.models import JobEvent

    call_command("seed_demo", stdout=io.StringIO())
    history = Job.objects.filter(name__startswith="history-")
    times = {job.id: job for job in history}
    events = JobEvent.objects.filter(job__in=history).values_list("job_id", "kind", "at")
    when = {"submitted": "submitted_at", "scheduled": "started_at", "dispatched": "started_at", "state": "ended_at"}
    wrong = [(job_id, kind) for job_id, kind, at in events if at != getattr(times[job_id], when[kind])]
    assert len(times) == 240 and len(events) == 4 * 240 and wrong == []
