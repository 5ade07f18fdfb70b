"""A session really launched on the local cluster, in its bubblewrap sandbox: "a web
server of your own" starts, is found ready through the poll (host from the backend,
port from the job's log), answers under its base URL with its secret in its
environment, and stops when deleted."""

from __future__ import annotations

import hashlib
import urllib.request

import pytest

from scheduler.choices import JobState
from scheduler.clusters.poll import poll_backends
from scheduler.jobs.verbs import cancel_job
from scheduler.models import InteractiveSession
from scheduler.reads.sessions import RUNNING, session_view
from tests.builders import launch, local_node_group, make_local_cluster
from tests.scheduler.tick.waiting import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.bwrap]

#: Serves one page under its base URL: the digest of the secret its environment holds.
SERVER = (
    'mkdir -p ".$QM_SESSION_BASE_URL" && printf %s "$QM_SESSION_SECRET" | sha256sum | cut -d" " -f1 '
    '> ".${QM_SESSION_BASE_URL}index.html" && exec python3 -m http.server "$QM_SESSION_PORT" --bind 127.0.0.1'
)


def test_a_web_server_of_one_s_own_starts_answers_and_stops(world, tick, django_capture_on_commit_callbacks):
    world.cluster.enabled = False
    world.cluster.save()
    make_local_cluster("sandboxed", [local_node_group("box-01", gpus=1, model="L4")], sandbox="bwrap")
    session = launch(world.alice, "web-server", {"command": SERVER})
    tick()

    def ready() -> InteractiveSession | None:
        poll_backends()
        fresh = InteractiveSession.objects.select_related("job", "app").get(pk=session.pk)
        assert fresh.job.state in (JobState.DISPATCHING, JobState.RUNNING), fresh.job.state_reason
        return fresh if fresh.ready_at is not None else None

    fresh = wait_for(ready, timeout=90, interval=0.3, what="the session's server to answer")

    assert fresh.host == "127.0.0.1" and fresh.port is not None and fresh.ready_at is not None
    assert session_view(fresh, fresh.ready_at).phase == RUNNING
    with urllib.request.urlopen(f"http://{fresh.host}:{fresh.port}{fresh.base_url}", timeout=30) as page:
        assert page.read().decode().strip() == hashlib.sha256(fresh.secret.encode()).hexdigest()
    with django_capture_on_commit_callbacks(execute=True):
        cancel_job(fresh.job, by="alice")

    def stopped() -> bool:
        try:
            urllib.request.urlopen(f"http://{fresh.host}:{fresh.port}{fresh.base_url}", timeout=5)
        except OSError:
            return True
        return False

    wait_for(stopped, timeout=60, interval=0.3, what="the session's server to stop")
