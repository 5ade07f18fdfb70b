"""Launching a session: a job like any other (admission, quotas), its script started
with its own base URL, a fresh secret that only dispatch hands to the job, and every
refusal named by field."""

from __future__ import annotations

import dataclasses

import pytest

from people.models import Quota
from scheduler.choices import JobState
from scheduler.clusters.dispatch import job_spec
from scheduler.models import InteractiveApp, InteractiveSession, Job
from scheduler.reads.inventory import load_inventory
from scheduler.sessions.launch import LaunchRefused, default_resources, launch_session
from scheduler.sessions.script import READY_MARKER, SECRET_ENV
from tests.builders import launch, local_node_group, make_local_cluster, submit

pytestmark = pytest.mark.django_db


def refused(owner, slug="web-server", values=None, **resources) -> dict:
    with pytest.raises(LaunchRefused) as caught:
        launch(owner, slug, values, **resources)
    return caught.value.problems


def test_a_launch_is_a_pending_job_of_its_owner_whose_script_serves_under_its_own_base_url(world):
    session = launch(world.alice, "jupyterlab")

    job = Job.objects.get(pk=session.job_id)
    assert (job.state, job.owner, job.account, job.name) == (JobState.PENDING, world.alice, world.lab, "jupyterlab")
    assert (job.gpus_per_node, job.walltime_seconds) == (1, 4 * 3600)
    assert f"--ServerApp.base_url=/sessions/{job.id}/" in job.script
    assert READY_MARKER in job.script and "/sessions/0/" not in job.script
    assert session.base_url == f"/sessions/{job.id}/"


def test_each_session_has_a_fresh_secret_that_only_dispatch_gives_its_job(world):
    first, second = launch(world.alice, "jupyterlab"), launch(world.alice, "jupyterlab")

    assert first.secret != second.secret and len(first.secret) >= 40
    job = Job.objects.get(pk=first.job_id)
    assert first.secret not in job.script and first.secret not in str(job.env)
    assert job_spec(job).env[SECRET_ENV] == first.secret


def test_a_plain_job_gets_no_session_secret(world):
    job = submit(world.alice, world.lab)
    assert SECRET_ENV not in job_spec(job).env


def test_the_app_s_values_reach_its_command_shell_quoted(world):
    session = launch(world.alice, "tensorboard", {"logdir": "/home/alice/runs/a b"})

    assert session.values == {"logdir": "/home/alice/runs/a b"}
    assert "--logdir '/home/alice/runs/a b'" in session.job.script


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        pytest.param({}, "logdir", "required", id="a field without default must be given"),
        pytest.param({"logdir": "runs"}, "logdir", "absolute path", id="a relative path"),
        pytest.param({"logdir": "/etc"}, "logdir", "/home/alice", id="a path outside the user's roots"),
        pytest.param({"logdir": "/home/alice/../bob"}, "logdir", "absolute path", id="a path that climbs out"),
        pytest.param({"logdir": "/home/alice", "x": "1"}, "x", "no field", id="a field the app does not have"),
    ],
)
def test_an_app_value_that_does_not_fit_is_refused_by_its_field(world, values, field, words):
    problems = refused(world.alice, "tensorboard", values)

    assert words in problems["values"][field][0]
    assert not InteractiveSession.objects.exists() and not Job.objects.exists()


def test_the_job_s_own_rules_are_admission_s_and_refuse_by_field(world):
    problems = refused(world.charlie, "jupyterlab", gpus=64)  # no node has 64 GPUs

    assert "gpus_per_node" in problems
    assert not Job.objects.exists()


def test_a_quota_refuses_a_session_as_it_refuses_a_job(world):
    Quota.objects.create(user=world.alice, max_pending_jobs=1)
    launch(world.alice, "jupyterlab")

    problems = refused(world.alice, "jupyterlab")

    assert "1 pending jobs" in problems["account"][0]
    assert InteractiveSession.objects.count() == 1


def test_a_disabled_app_is_not_launched(world):
    InteractiveApp.objects.filter(slug="jupyterlab").update(enabled=False)

    assert "not offered" in refused(world.alice, "jupyterlab")["app"][0]


def test_an_app_restricted_to_disabled_clusters_is_not_offered(world):
    elsewhere = make_local_cluster("elsewhere", [local_node_group("other-01")])
    elsewhere.enabled = False
    elsewhere.save()
    InteractiveApp.objects.get(slug="jupyterlab").clusters.set([elsewhere])

    assert "not offered" in refused(world.alice, "jupyterlab")["app"][0]
    InteractiveApp.objects.get(slug="jupyterlab").clusters.set([world.cluster])
    assert launch(world.alice, "jupyterlab").job.state == JobState.PENDING


def test_a_misdefined_app_says_so_instead_of_launching(world):
    InteractiveApp.objects.filter(slug="jupyterlab").update(command="jupyter lab --port {port} --dir {workdir}")

    assert "workdir" in refused(world.alice, "jupyterlab")["app"][0]


def test_the_launch_takes_the_resources_asked(world):
    app = InteractiveApp.objects.get(slug="jupyterlab")
    asked = dataclasses.replace(default_resources(app), gpus=2, memory_mib=4096, walltime_seconds=1800)

    session = launch_session(app, world.alice, {}, asked, account=world.lab, qos=None, hardware=load_inventory())

    job = session.job
    assert (job.gpus_per_node, job.memory_mib_per_node, job.walltime_seconds) == (2, 4096, 1800)
