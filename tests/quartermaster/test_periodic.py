"""One table of periodic jobs (``quartermaster.periodic``) feeds both Celery beat and ``run_scheduler``."""

from __future__ import annotations

import io
import os
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

import monitoring.tasks
import notifications.tasks
import people.tasks
import scheduler.tasks
from quartermaster.celery import app
from quartermaster.management.commands import run_scheduler
from quartermaster.periodic import beat_schedule, periodic_jobs

SETTINGS = Path(__file__).resolve().parents[2] / "quartermaster" / "settings.py"
#: The tasks the table may name, imported so that they are registered with ``app``.
TASK_MODULES = (scheduler.tasks, monitoring.tasks, notifications.tasks, people.tasks)
#: A table with every job in it and a different period for each.
EVERY_JOB = periodic_jobs(
    SimpleNamespace(
        SCHEDULER_TICK_SECONDS=1.0,
        SCHEDULER_POLL_SECONDS=2.0,
        SCHEDULER_ESTIMATE_SECONDS=3.0,
        MONITORING_ROLLUP_SECONDS=4.0,
        MONITORING_SAMPLE_SECONDS=5.0,
        MONITORING_SIMULATE=True,
        LDAP_SERVER_URI="ldap://directory.example.org",
        LDAP_SYNC_SECONDS=6.0,
        NOTIFY_SECONDS=7.0,
        SCHEDULER_BACKTEST_SECONDS=8.0,
    )
)


def test_every_periodic_job_runs_a_registered_celery_task():
    unregistered = {job.task for job in (*periodic_jobs(settings), *EVERY_JOB)} - set(app.tasks)
    assert not unregistered


def test_the_embedded_loop_registers_every_task_of_the_table_by_itself():
    """In a fresh interpreter, as ``make demo`` starts it: importing ``run_scheduler``
    alone must register every task the table names (this test module imports them all,
    so only a process of its own can tell)."""
    program = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from quartermaster.management.commands import run_scheduler\n"
        "from quartermaster.periodic import periodic_jobs\n"
        "missing = {j.task for j in periodic_jobs(settings)} - set(run_scheduler.celery_app.tasks)\n"
        "print(sorted(missing))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "quartermaster.settings", "DEBUG": "1"},
        cwd=SETTINGS.parents[1],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_beat_runs_exactly_the_table():
    assert beat_schedule(periodic_jobs(settings)) == settings.CELERY_BEAT_SCHEDULE
    assert app.conf.beat_schedule == settings.CELERY_BEAT_SCHEDULE


def test_each_beat_entry_runs_its_task_and_expires_after_its_own_period():
    assert len({job.every_seconds for job in EVERY_JOB} - {60.0, 300.0, 3600.0}) == 8  # a mix-up would show
    assert beat_schedule(EVERY_JOB) == {
        job.name: {"task": job.task, "schedule": job.every_seconds, "options": {"expires": job.every_seconds}}
        for job in EVERY_JOB
    }


@pytest.mark.parametrize(
    "environ,simulate",
    [
        ({"MONITORING_SIMULATE": "1", "REDIS_URL": "redis://redis:6379/0"}, True),
        ({"MONITORING_SIMULATE": "0"}, False),
        ({}, True),  # the embedded demo: no broker
        ({"REDIS_URL": "redis://redis:6379/0"}, False),
        ({"CELERY_BROKER_URL": "redis://redis:6379/1"}, False),
    ],
    ids=["on-with-broker", "off-without-broker", "default-embedded", "default-redis", "default-broker"],
)
def test_the_simulated_feed_is_in_the_table_iff_monitoring_simulate(monkeypatch, environ, simulate):
    for name in ("MONITORING_SIMULATE", "REDIS_URL", "CELERY_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    loaded = runpy.run_path(str(SETTINGS))
    assert loaded["MONITORING_SIMULATE"] is simulate
    beat = {entry["task"] for entry in loaded["CELERY_BEAT_SCHEDULE"].values()}
    assert ("monitoring.simulate" in beat) is simulate


@pytest.mark.parametrize("simulate", [True, False])
def test_run_scheduler_once_runs_every_table_task_by_name_in_table_order(monkeypatch, settings, simulate, db):
    settings.MONITORING_SIMULATE = simulate
    ran: list[str] = []
    tasks = {job.task: (lambda task=job.task: ran.append(task)) for job in EVERY_JOB}
    monkeypatch.setattr(run_scheduler, "celery_app", SimpleNamespace(tasks=tasks))
    call_command("run_scheduler", "--once", stdout=io.StringIO())
    assert ran == [job.task for job in periodic_jobs(settings)]
    assert ("monitoring.simulate" in ran) is simulate


def test_a_failing_periodic_job_is_reported_and_the_others_still_run(monkeypatch, settings, db):
    """The embedded loop outlives a job that raises (a database restarting, a bug in one
    task): the error is printed and logged, the rest of the table runs."""
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("database went away")

    tasks: dict[str, Any] = {job.task: (lambda task=job.task: ran.append(task)) for job in EVERY_JOB}
    tasks["scheduler.poll_backends"] = fails
    monkeypatch.setattr(run_scheduler, "celery_app", SimpleNamespace(tasks=tasks))
    err = io.StringIO()

    call_command("run_scheduler", "--once", stdout=io.StringIO(), stderr=err)

    assert "scheduler.poll_backends failed: RuntimeError('database went away'); the loop goes on" in err.getvalue()
    assert ran == [job.task for job in periodic_jobs(settings) if job.task != "scheduler.poll_backends"]
