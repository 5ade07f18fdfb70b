"""One list of request fields (``scheduler.jobs.request.REQUEST_FIELDS``): every request
field of the core's ``PendingJob`` is on it, and every field on it is accepted and shown
by the API, offered by the web form and carried by "resubmit as copy".

Personas (tests/conftest.py): alice is a member of lab.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from scheduler.api.serializers import JobSerializer, JobSubmitSerializer
from scheduler.core.types import PendingJob
from scheduler.jobs.request import NOT_REQUEST_FIELDS, PENDING_NAMES, REQUEST_FIELDS, request_values
from scheduler.models import Job, Reservation
from tests.builders import local_node_group, make_local_cluster, submit

pytestmark = pytest.mark.django_db

WHAT_TO_RUN = {"account": "lab", "command": "python train.py"}


@pytest.fixture
def requests(world) -> dict[str, dict[str, Any]]:
    """Two requests that between them ask for every request field away from its API
    default (a share of a GPU is one GPU per node, so one request cannot do both), on a
    cluster that can hold them: two nodes labelled rack=r2 with shared H100s."""
    group = local_node_group("ts-{:02d}", count=2, gpus=2)
    group["gpus"]["shared"] = True
    group["labels"] = {"rack": "r2", "network": "infiniband"}
    sliced = make_local_cluster("sliced", [group])
    week = Reservation.objects.create(
        name="lab-week", kind="accounts", start_at=timezone.now(), end_at=timezone.now() + timedelta(days=7)
    )
    week.nodes.set(sliced.nodes.all())
    week.accounts.add(world.lab)
    earlier = submit(world.alice, world.lab, name="prepare")
    common = {
        "nodes": 2,
        "cpus_per_node": 4,
        "memory_mib_per_node": 2048,
        "gpu_model": "H100-80GB",
        "min_gpu_memory_mib": 40_000,
        "min_compute_capability": "9.0",
        "walltime_seconds": 5400,
        "nice": 5,
        "dependencies": [{"type": "afterany", "job": earlier.id}],
        "node_labels": {"rack": "r2", "network": "infiniband"},
        "reservation": "lab-week",
    }
    return {
        "whole-gpus": {**common, "gpus_per_node": 2, "gpu_share": 0.0, "gpu_memory_mib_share": 0},
        "shared-gpu": {**common, "gpus_per_node": 1, "gpu_share": 0.5, "gpu_memory_mib_share": 20_000},
    }


SAMPLES = pytest.mark.parametrize("sample", ["whole-gpus", "shared-gpu"])


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_every_request_field_of_a_pending_job_is_on_the_list():
    pending_fields = {f.name for f in dataclasses.fields(PendingJob)}
    assert {PENDING_NAMES.get(name, name) for name in REQUEST_FIELDS} == pending_fields - NOT_REQUEST_FIELDS
    assert pending_fields >= NOT_REQUEST_FIELDS


def test_the_requests_below_ask_for_every_field_away_from_its_default(requests):
    defaults = {name: field.default for name, field in JobSubmitSerializer().fields.items()}
    for name in REQUEST_FIELDS:
        assert any(r[name] != defaults[name] for r in requests.values()), name


def test_the_api_takes_and_shows_every_request_field():
    submitted, shown = JobSubmitSerializer().fields, JobSerializer().fields
    for name in REQUEST_FIELDS:
        assert name in submitted and not submitted[name].read_only, name
        assert name in shown, name


@SAMPLES
def test_a_request_submitted_through_the_api_is_stored_and_shown_whole(world, client_for, requests, sample):
    wanted = requests[sample]
    response = client_for(world.alice).post("/api/v1/jobs/", {"name": "x", **WHAT_TO_RUN, **wanted}, format="json")
    assert response.status_code == 201, response.json()
    assert request_values(Job.objects.get(name="x")) == wanted
    assert {name: response.json()[name] for name in REQUEST_FIELDS} == wanted


def test_the_form_offers_every_request_field(world):
    html = logged_in(world.alice).get("/jobs/new/").content.decode()
    for name in REQUEST_FIELDS:
        assert f'name="{name}"' in html, name


@SAMPLES
def test_resubmit_as_copy_through_the_form_asks_for_the_same_request(world, requests, sample):
    original = submit(world.alice, world.lab, name="orig", **requests[sample])
    client = logged_in(world.alice)
    prefilled = client.get("/jobs/new/", {"copy": original.id}).context["form"].initial
    response = client.post("/jobs/new/", prefilled)
    assert response.status_code == 302, response.context["form"].errors
    assert request_values(Job.objects.get(name="orig-copy")) == request_values(original) == requests[sample]
