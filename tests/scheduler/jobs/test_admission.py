"""Admission (``scheduler.jobs.admission``): every rule a job submission must pass, asked
directly; and the API, the what-if and the submit form answering with its words.

Personas (tests/conftest.py): alice is a member of lab; the test cluster has two 8-GPU
H100 nodes (64 CPUs, 512,000 MiB each) and one 4-GPU L4 node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from people.models import Qos, Quota
from scheduler.jobs.admission import admission_problems
from scheduler.models import Cluster, Job
from scheduler.reads.inventory import load_inventory
from tests.builders import end, job_request, local_node_group, make_local_cluster, make_user, start, submit

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Case:
    id: str
    request: dict[str, Any]
    problems: dict[str, list[str]]
    #: Makes the world the case needs; returns the arguments that differ from alice's
    #: job in lab under the default QOS.
    given: Callable[[Any, Any], dict[str, Any]] = field(default=lambda world, settings: {})


def _qos_short(world: Any, settings: Any) -> dict[str, Any]:
    short = Qos.objects.create(name="short", max_walltime_seconds=300)
    world.lab.allowed_qos.add(short)
    return {"qos": short}


def _qos_not_allowed(world: Any, settings: Any) -> dict[str, Any]:
    Qos.objects.create(name="normal")
    return {"qos": Qos.objects.create(name="premium")}


def _small_arrays(world: Any, settings: Any) -> dict[str, Any]:
    settings.JOB_ARRAY_MAX_BYTES = 1000
    return {}


def _cluster_running_jobs_as_owners(world: Any, settings: Any) -> dict[str, Any]:
    Cluster.objects.create(name="hpc", kind="slurm", config={})
    return {}


def _mig_cluster(world: Any, settings: Any) -> dict[str, Any]:
    """A second cluster with the demo's a100-04: eight A100s, each split into two slices."""
    group = local_node_group("a100-04", model="A100-40GB")
    group["gpus"]["mig"] = ["3g.20gb", "3g.20gb"]
    make_local_cluster("mig", [group])
    return {}


def _full_account_quota(world: Any, settings: Any) -> dict[str, Any]:
    Quota.objects.create(account=world.lab, max_pending_jobs=1)
    submit(world.alice, world.lab)
    return {}


def _account_quota_of_10(world: Any, settings: Any) -> dict[str, Any]:
    Quota.objects.create(account=world.lab, max_pending_jobs=10)
    return {}


def _user_walltime_quota(world: Any, settings: Any) -> dict[str, Any]:
    Quota.objects.create(user=world.alice, max_walltime_seconds=300)
    return {}


def _debug_lane(world: Any, settings: Any) -> dict[str, Any]:
    """The usual debug lane: 2 GPUs, 8 CPUs and 2 submitted jobs per user, 4 GPUs in all."""
    debug = Qos.objects.create(
        name="debug", max_gpus_per_user=2, max_cpus_per_user=8, max_submitted_jobs_per_user=2, max_gpus=4
    )
    world.lab.allowed_qos.add(debug)
    return {"qos": debug}


def _debug_lane_with_two_jobs(world: Any, settings: Any) -> dict[str, Any]:
    """The debug lane, where alice has one job pending and one running (and one ended,
    which does not count)."""
    given = _debug_lane(world, settings)
    now = timezone.now()
    assert end(start(submit(world.alice, world.lab, qos=given["qos"]), now), now)
    start(submit(world.alice, world.lab, qos=given["qos"]), now)
    submit(world.alice, world.lab, qos=given["qos"])
    return given


def _qos_of_no_jobs(world: Any, settings: Any) -> dict[str, Any]:
    closed = Qos.objects.create(name="closed", max_running_jobs_per_user=0)
    world.lab.allowed_qos.add(closed)
    return {"qos": closed}


CASES = [
    Case("a request every rule admits", job_request(), {}),
    # What to run
    Case("nothing to run", job_request(command=""), {"command": ["Give a command or a script."]}),
    Case(
        "a command and a script",
        job_request(script="#!/bin/bash\ntrue"),
        {"script": ["Give a command or a script, not both."]},
    ),
    # Who pays
    Case(
        "an account she does not belong to",
        job_request(),
        {"account": ["You are not a member of account 'other'."]},
        lambda world, settings: {"account": world.other},
    ),
    Case(
        "no account named, and she belongs to none",
        job_request(),
        {"account": ["This field is required (you belong to no account: ask staff to add you to one)."]},
        lambda world, settings: {"owner": make_user("eve"), "account": None},
    ),
    Case(
        "a QOS her account may not use",
        job_request(),
        {"qos": ["Account 'lab' may not use QOS 'premium' (it may use: normal)."]},
        _qos_not_allowed,
    ),
    Case(
        "walltime over the QOS limit",
        job_request(walltime_seconds=301),
        {"walltime_seconds": ["5 min 1 s exceeds the maximum of QOS 'short' (5 min)."]},
        _qos_short,
    ),
    Case("a request inside the debug lane's limits", job_request(gpus_per_node=2, cpus_per_node=8), {}, _debug_lane),
    Case(
        "3 GPUs where the debug lane allows a user 2",
        job_request(gpus_per_node=3),
        {
            "gpus_per_node": [
                "This job asks for 3 GPUs; QOS 'debug' allows one user at most 2 at once (QOSMaxGRESPerUser)."
            ]
        },
        _debug_lane,
    ),
    Case(
        "2 nodes of 2 GPUs count 4 against the debug lane's 2 per user",
        job_request(nodes=2, gpus_per_node=2),
        {
            "gpus_per_node": [
                "This job asks for 4 GPUs; QOS 'debug' allows one user at most 2 at once (QOSMaxGRESPerUser)."
            ]
        },
        _debug_lane,
    ),
    Case(
        "9 CPUs where the debug lane allows a user 8",
        job_request(cpus_per_node=9),
        {
            "cpus_per_node": [
                "This job asks for 9 CPUs; QOS 'debug' allows one user at most 8 at once (QOSMaxCpuPerUserLimit)."
            ]
        },
        _debug_lane,
    ),
    Case(
        "a QOS that lets no user run a job",
        job_request(),
        {"qos": ["QOS 'closed' lets no user run a job (QOSMaxJobsPerUserLimit is 0)."]},
        _qos_of_no_jobs,
    ),
    Case(
        "submit refusal: alice has 2 jobs pending or running in the debug lane, which allows 2",
        job_request(),
        {
            "qos": [
                "User alice already has 2 jobs pending or running in QOS 'debug'; it allows 2 per user "
                "(QOSMaxSubmitJobPerUserLimit)."
            ]
        },
        _debug_lane_with_two_jobs,
    ),
    # Arrays
    Case(
        "an array holding more bytes than JOB_ARRAY_MAX_BYTES",
        job_request(array="0-99"),
        {
            "array": [
                "100 tasks of 15 bytes (command and script) each, and 0 bytes of files, exceed the 1000 bytes an "
                "array may hold; put the inputs on the cluster's storage and read them by $QM_ARRAY_TASK_ID."
            ]
        },
        _small_arrays,
    ),
    # Reservations
    Case(
        "a reservation that does not exist",
        job_request(reservation="nope"),
        {"reservation": ["There is no reservation 'nope' (or it has ended)."]},
    ),
    # Fractional GPUs
    Case(
        "a share of a GPU on 2 GPUs per node, where no GPU is shared",
        job_request(gpus_per_node=2, gpu_share=0.5),
        {
            "gpus_per_node": ["A fractional job (gpu_share) takes a share of 1 GPU per node."],
            "gpu_share": ["No node has a shared GPU (time-slicing or MPS) matching this request."],
        },
    ),
    Case(
        "GPU memory reserved without a share",
        job_request(gpu_memory_mib_share=1024),
        {"gpu_memory_mib_share": ["Only a fractional job (gpu_share) reserves a share of GPU memory."]},
    ),
    # Hardware
    Case(
        "9 GPUs on one node where the largest node has 8",
        job_request(gpus_per_node=9),
        {"gpus_per_node": ["No node has 9 GPUs; the most on one node is 8."]},
    ),
    Case(
        "9 GPUs on one node where a node has 16 MIG slices: slices are not GPUs",
        job_request(gpus_per_node=9),
        {"gpus_per_node": ["No node has 9 GPUs; the most on one node is 8."]},
        _mig_cluster,
    ),
    Case(
        "17 slices on one node where the most is 16: a slice is asked for by its label",
        job_request(gpus_per_node=17, gpu_model="A100-40GB/3g.20gb"),
        {"gpus_per_node": ["No node has 17 GPUs matching model A100-40GB/3g.20gb; the most on one node is 16."]},
        _mig_cluster,
    ),
    Case(
        "8 L4 GPUs on one node where the L4 node has 4",
        job_request(gpus_per_node=8, gpu_model="L4"),
        {"gpus_per_node": ["No node has 8 GPUs matching model L4; the most on one node is 4."]},
    ),
    Case(
        "a GPU model no node has",
        job_request(gpu_model="TPUv5"),
        {"gpu_model": ["Unknown GPU model 'TPUv5'; known models: H100-80GB, L4."]},
    ),
    Case(
        "3 whole H100 nodes where the cluster has 2",
        job_request(nodes=3, gpus_per_node=8),
        {"nodes": ["At most 2 nodes of one cluster can hold this per-node request; 3 were asked."]},
    ),
    Case(
        "more memory than the largest node",
        job_request(memory_mib_per_node=600_000),
        {"memory_mib_per_node": ["No node has 600000 MiB; the largest has 512000."]},
    ),
    # Identity
    Case(
        "no cluster identity where a cluster runs jobs as their owners",
        job_request(),
        {
            "cluster_identity": [
                "You have no cluster identity (the POSIX user your jobs run as), and cluster hpc runs every job as "
                "its owner: ask staff to set yours."
            ]
        },
        _cluster_running_jobs_as_owners,
    ),
    # Quotas (the guaranteed share of the queue)
    Case(
        "quota refusal: the account's pending-jobs quota is full",
        job_request(),
        {"account": ["Account lab already has 1 pending jobs; the quota allows 1."]},
        _full_account_quota,
    ),
    Case(
        "quota refusal: an array larger than the pending-jobs quota",
        job_request(array="0-99"),
        {"account": ["Account lab already has 0 pending jobs and the array adds 100 tasks; the quota allows 10."]},
        _account_quota_of_10,
    ),
    Case(
        "quota refusal: walltime over the user's quota maximum",
        job_request(),
        {"walltime_seconds": ["10 min exceeds the User alice quota maximum of 5 min."]},
        _user_walltime_quota,
    ),
    Case(
        "a full quota is not mentioned while another rule refuses",
        job_request(gpus_per_node=9),
        {"gpus_per_node": ["No node has 9 GPUs; the most on one node is 8."]},
        _full_account_quota,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_admission(world: Any, settings: Any, case: Case) -> None:
    arguments = {"owner": world.alice, "account": world.lab, "qos": None, **case.given(world, settings)}
    problems = admission_problems(case.request, **arguments, hardware=load_inventory(), now=timezone.now())
    assert problems == case.problems


# --- The API, the what-if and the form say what admission says ----------------------------------


@dataclass(frozen=True)
class Same:
    """One bad request as each door takes it: the API's JSON body and the form's text."""

    id: str
    api: dict[str, Any]
    form: dict[str, str]
    given: Callable[[Any, Any], dict[str, Any]] = field(default=lambda world, settings: {})


BAD = [
    Same("9 GPUs on one node where the largest node has 8", {"gpus_per_node": 9}, {"gpus_per_node": "9"}),
    Same(
        "walltime over the QOS limit",
        {"qos": "short", "walltime_seconds": 301},
        {"qos": "short", "walltime_seconds": "301"},
        _qos_short,
    ),
    Same("array too large", {"array": "0-99"}, {"array": "0-99"}, _small_arrays),
    Same(
        "more GPUs than the QOS allows a user",
        {"qos": "debug", "gpus_per_node": 3},
        {"qos": "debug", "gpus_per_node": "3"},
        _debug_lane,
    ),
    Same("the QOS's submitted jobs are full", {"qos": "debug"}, {"qos": "debug"}, _debug_lane_with_two_jobs),
    Same("quota refusal", {}, {}, _full_account_quota),
]


def _form_problems(client: Client, body: dict[str, str]) -> dict[str, list[str]]:
    response = client.post("/jobs/new/", body)
    assert response.status_code == 200, response.status_code  # the form again, with its errors
    return {name: list(errors) for name, errors in response.context["form"].errors.items()}


@pytest.mark.parametrize("bad", BAD, ids=[bad.id for bad in BAD])
def test_the_api_the_what_if_and_the_form_give_admissions_problems(
    world: Any, settings: Any, client_for: Any, bad: Same
) -> None:
    given = bad.given(world, settings)
    request = job_request(**{k: v for k, v in bad.api.items() if k != "qos"})
    expected = admission_problems(
        request,
        owner=world.alice,
        account=world.lab,
        qos=given.get("qos"),
        hardware=load_inventory(),
        now=timezone.now(),
    )
    assert expected  # a bad request
    api = client_for(world.alice)
    body = {"name": "train", "account": "lab", "command": "python train.py", "walltime_seconds": 600, **bad.api}
    form = Client()
    form.force_login(world.alice)
    text = {"name": "train", "account": "lab", "command": "python train.py", "walltime_seconds": "600", **bad.form}
    jobs = Job.objects.count()

    submitted = api.post("/api/v1/jobs/", body, format="json")
    estimated = api.post("/api/v1/jobs/estimate/", body, format="json")
    assert (submitted.status_code, estimated.status_code) == (400, 400)
    assert submitted.json() == expected
    assert estimated.json() == expected
    assert _form_problems(form, {**text, "action": "submit"}) == expected
    assert _form_problems(form, {**text, "action": "estimate"}) == expected
    assert Job.objects.count() == jobs


# --- What admission costs a submission ----------------------------------------------------------


def test_a_submission_asks_as_many_queries_as_before_admission_moved(world: Any, client_for: Any) -> None:
    """The API's submit path, with an account quota as the benchmark has
    (``benchmarks/submit.py``): 15 queries for one job (14 on PostgreSQL, where the job
    and its event are one statement), 17 for a 100-task array, as before the rules moved
    out of the serializer (the quotas are read once, under lock, by the submission; the
    standing rules once, by the serializer)."""
    Quota.objects.create(account=world.lab, max_pending_jobs=100_000)
    client = client_for(world.alice)
    body = {
        "name": "train",
        "account": "lab",
        "command": "python train.py",
        "gpus_per_node": 1,
        "walltime_seconds": 600,
    }
    assert client.post("/api/v1/jobs/", body, format="json").status_code == 201  # warm: session, caches
    counts = []
    for extra in ({}, {"array": "0-99"}):
        with CaptureQueriesContext(connection) as queries:
            assert client.post("/api/v1/jobs/", {**body, **extra}, format="json").status_code == 201
        counts.append(len(queries))
    assert counts == ([14, 17] if connection.vendor == "postgresql" else [15, 17])


def test_admission_reads_as_much_for_a_100_task_array_as_for_one_job(world: Any) -> None:
    Quota.objects.create(account=world.lab, max_pending_jobs=100_000)

    def admit(request: dict[str, Any]) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert not admission_problems(
                request, owner=world.alice, account=world.lab, qos=None, hardware=load_inventory(), now=timezone.now()
            )
        return len(queries)

    admit(job_request())  # warm: what the owner object keeps (her cluster identity)
    assert admit(job_request()) == admit(job_request(array="0-99"))
