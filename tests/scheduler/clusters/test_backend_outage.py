"""A cluster whose workload manager is down: marked so, nothing placed there, jobs say
why, and the other clusters keep being served."""

from __future__ import annotations

from unittest import mock

import pytest

from scheduler.backends.base import BackendError
from scheduler.choices import JobState
from scheduler.clusters.poll import poll_backends
from scheduler.jobs.remote import backend_for as real_backend_for
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Cluster, Job
from tests.builders import local_node_group, make_local_cluster, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters(world):
    make_local_cluster("second", [local_node_group("l4-{:02d}x", count=1, gpus=4, model="L4")])
    return world


def poll_with_first_down(world):  # type: ignore[no-untyped-def]
    real = real_backend_for

    def backend_for(cluster):  # type: ignore[no-untyped-def]
        if cluster.name == world.cluster.name:
            down = mock.Mock()
            down.list_nodes.side_effect = BackendError("controller timed out after 10s", permanent=False)
            return down
        return real(cluster)

    with mock.patch("scheduler.clusters.poll.backend_for", backend_for):
        return poll_backends()


def test_an_unreachable_cluster_is_marked_and_its_jobs_say_why(two_clusters, tick, client_for):
    report = poll_with_first_down(two_clusters)
    assert report[two_clusters.cluster.name] == {"error": 1}
    cluster = Cluster.objects.get(pk=two_clusters.cluster.pk)
    assert (cluster.reachable, cluster.last_error) == (False, "controller timed out after 10s")
    body = client_for(two_clusters.admin).get(f"/api/v1/clusters/{cluster.id}/").json()
    assert body["reachable"] is False and body["last_error"] == "controller timed out after 10s"

    stuck = submit(two_clusters.alice, two_clusters.lab, gpu_model="H100-80GB")
    served = submit(two_clusters.alice, two_clusters.lab, gpu_model="L4", command="sleep 30")
    tick()
    stuck.refresh_from_db()
    served.refresh_from_db()
    assert served.state == JobState.RUNNING  # the other cluster keeps working
    assert stuck.pending_reason == "ReqNodeNotAvail"
    message = stuck.pending_blockers[0]["message"]
    assert f"cluster {cluster.name} is unreachable: controller timed out after 10s" in message
    cancel_job(served, by="test")


def test_the_next_good_poll_brings_it_back(two_clusters, tick):
    poll_with_first_down(two_clusters)
    poll_backends()
    cluster = Cluster.objects.get(pk=two_clusters.cluster.pk)
    assert (cluster.reachable, cluster.last_error) == (True, "")
    assert cluster.last_contact_at is not None
    job = submit(two_clusters.alice, two_clusters.lab, gpu_model="H100-80GB", command="sleep 30")
    tick()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    cancel_job(Job.objects.get(pk=job.pk), by="test")
