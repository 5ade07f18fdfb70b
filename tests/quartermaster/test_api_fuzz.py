"""Fuzz the whole API from its own OpenAPI schema, as a researcher and as an admin.

Schemathesis turns every operation of ``/api/schema/`` into a test and sends generated
requests (valid and invalid bodies, odd path and query values, boundary values) through
the WSGI app with a real API token. Every answer must hold to the contract:

- no 5xx, whatever was sent;
- the status code is one the schema documents, with the documented content type;
- the body matches the documented schema.

Each operation starts from the personas plus a QOS, quotas and jobs in several states.
Path ids are often those of existing rows, and names (accounts, users, QOS, GPU models)
often real ones, so detail endpoints and writes are reached instead of answering 404 or
400 every time; the operations a persona must get through are checked to have answered
2xx at least once. Inputs that once caused a 500 are kept as fixed cases at the end.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from people import services as portal_services
from people.models import Account, ApiToken, Membership, Qos, Quota
from quartermaster.wsgi import application
from scheduler.jobs.verbs import cancel_job, hold_job
from scheduler.models import Cluster, Gpu, Job, Node
from scheduler.tick.run import run_tick
from tests.builders import MODELS, local_node_group, submit

pytestmark = pytest.mark.django_db

#: Generated requests per operation in the fuzzing phase; the schema's examples and the
#: boundary cases of the coverage phase come on top.
MAX_EXAMPLES = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: How often a name in a body or filter, or an ``{id}``, is one that exists.
REAL_VALUE_PROBABILITY = 0.5

#: The collection behind each ``/api/v1/<collection>/{id}/`` path.
COLLECTIONS = {
    "accounts": Account,
    "memberships": Membership,
    "qos": Qos,
    "quotas": Quota,
    "tokens": ApiToken,
    "jobs": Job,
    "nodes": Node,
    "gpus": Gpu,
    "clusters": Cluster,
}
#: Operations that must answer 2xx at least once in a persona's run.
MUST_SUCCEED = {
    "alice": {
        "POST /api/v1/jobs/",
        "POST /api/v1/jobs/estimate/",
        "GET /api/v1/jobs/",
        "GET /api/v1/jobs/{id}/",
        "GET /api/v1/accounts/{id}/",
        "GET /api/v1/tokens/",  # creating one takes a signed-in session, never a token
    },
    "admin": {"POST /api/v1/jobs/", "GET /api/v1/nodes/{id}/", "POST /api/v1/accounts/", "PATCH /api/v1/qos/{id}/"},
}
#: Random bodies rarely satisfy every cross-field rule of a submission; this one does.
VALID_JOB = {
    "name": "train",
    "account": "lab",
    "command": "python train.py",
    "gpus_per_node": 1,
    "walltime_seconds": 60,
}
NAMES = {
    "accounts": ["lab", "other"],
    "users": ["alice", "bob", "dora", "charlie", "admin"],
    "qos": ["normal", "high"],
    "clusters": ["test"],
    "gpu_models": sorted(MODELS),
}


def _real(dictionary: str) -> dict[str, Any]:
    return {"dictionary": dictionary, "probability": REAL_VALUE_PROBABILITY}


CONFIG = schemathesis.Config.from_dict(
    {
        "dictionaries": {name: {"values": values} for name, values in NAMES.items()},
        "parameters": {
            "query.account": _real("accounts"),
            "query.owner": _real("users"),
            "query.cluster": _real("clusters"),
            "body.account": _real("accounts"),
            "body.parent": _real("accounts"),
            "body.user": _real("users"),
            "body.qos": _real("qos"),
            "body.may_preempt[*]": _real("qos"),
            "body.gpu_model": _real("gpu_models"),
        },
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
    }
)
# Rendering the schema needs no database: the anonymous request reads no session (and so
# needs the schema opened to anonymous callers while the module loads).
with override_settings(API_SCHEMA_PUBLIC=True):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application, config=CONFIG)

#: Ids per collection as each test begins. Generation must not depend on rows the fuzzer
#: deletes meanwhile: Hypothesis replays draws and insists on the same shape.
EXISTING_IDS: dict[str, list[int]] = {}


def _existing_ids(operation: Any) -> list[int]:
    return EXISTING_IDS.get(operation.path.removeprefix("/api/v1/").split("/")[0], [])


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Often aim an integer ``{id}`` at a row of the right collection."""
    ids = _existing_ids(context.operation)
    if not ids or not path_parameters or not isinstance(path_parameters.get("id"), int):
        return st.just(path_parameters)
    return st.one_of(st.just(path_parameters), st.sampled_from(ids).map(lambda pk: {**path_parameters, "id": pk}))


@schema.hook
def before_add_examples(context: Any, examples: list[Any]) -> None:
    if context.operation.label in {"POST /api/v1/jobs/", "POST /api/v1/jobs/estimate/"}:
        examples.append(context.operation.Case(body=VALID_JOB, media_type="application/json"))


@pytest.fixture(autouse=True)
def _one_connection_per_test() -> Iterator[None]:
    """Keep the test's connection open across requests, as Django's test client does.

    Through the real WSGI app every request ends with ``close_old_connections``, which
    would close the connection that holds the test's transaction.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def _submissions_unlimited() -> Iterator[None]:
    """The fuzzer submits hundreds of times a minute: JOB_SUBMIT_RATE would answer most
    with 429 (documented, so still within the contract) and leave no submission through.
    The rate itself is tested in tests/scheduler/jobs/test_files.py."""
    with override_settings(JOB_SUBMIT_RATE="1000000/minute"):
        yield


@pytest.fixture
def fuzz_world(world: Any) -> Any:
    """The personas, plus QOS, quotas and jobs in several states (one placed on the cluster)."""
    Qos.objects.create(name="normal", max_walltime_seconds=7 * 24 * 3600)
    Qos.objects.create(name="high", priority=100)
    Quota.objects.create(account=world.lab, max_gpus=16, max_gpus_per_model={"H100-80GB": 8}, max_pending_jobs=50)
    Quota.objects.create(user=world.bob, max_running_jobs=4)
    submit(world.alice, world.lab, name="placed")
    run_tick()  # the job is placed, so the cluster is in use
    hold_job(submit(world.alice, world.lab, name="held"), by="alice")
    cancel_job(submit(world.alice, world.lab, name="cancelled"), by="alice")
    submit(world.alice, world.lab, name="pending")
    submit(world.charlie, world.other, name="charlies")
    for user in (world.alice, world.admin):
        portal_services.create_api_token(user, "laptop")
    EXISTING_IDS.clear()
    EXISTING_IDS.update(
        {name: list(model._default_manager.values_list("pk", flat=True)) for name, model in COLLECTIONS.items()}
    )
    return world


class Caller:
    """Sends each case as one persona with a live token, validates it and tallies statuses."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.seen: Counter[tuple[str, int]] = Counter()
        self._token: ApiToken | None = None
        self._secret = ""

    def _authorization(self) -> str:
        # The fuzzer may revoke the very token it uses (DELETE /tokens/{id}/): take a new one then.
        if self._token is None or not ApiToken.objects.filter(pk=self._token.pk, revoked_at__isnull=True).exists():
            self._token, self._secret = portal_services.create_api_token(self.user, "fuzz")
        return f"Bearer {self._secret}"

    def __call__(self, case: Any) -> None:
        ids = _existing_ids(case.operation)
        if ids and case.meta and case.meta.phase.name == "coverage" and (case.path_parameters or {}).get("id") == "0":
            # The coverage phase sends all its boundary bodies to {id} 0, which no row has:
            # they would all stop at 404. Aim them at an existing row to reach validation.
            case.path_parameters["id"] = ids[0]
        response = case.call(headers={"Authorization": self._authorization()})
        self.seen[(case.operation.label, response.status_code)] += 1
        case.validate_response(response, checks=CHECKS)

    def succeeded(self, operation: str) -> bool:
        return any(200 <= status < 300 for (label, status) in self.seen if label == operation)


def _caller(user: Any) -> Iterator[Caller]:
    caller = Caller(user)
    yield caller
    # Only 4xx answers would test little: some operations must get through.
    for label in {label for label, _ in caller.seen} & MUST_SUCCEED[user.username]:
        assert caller.succeeded(label), f"{user.username}: {label} never answered 2xx: {dict(caller.seen)}"


@pytest.fixture
def as_alice(fuzz_world: Any) -> Iterator[Caller]:
    yield from _caller(fuzz_world.alice)


@pytest.fixture
def as_admin(fuzz_world: Any) -> Iterator[Caller]:
    yield from _caller(fuzz_world.admin)


FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@schema.parametrize()
@FUZZ
def test_api_keeps_its_contract_for_a_researcher(case: Any, as_alice: Caller) -> None:
    as_alice(case)


@schema.parametrize()
@FUZZ
def test_api_keeps_its_contract_for_an_admin(case: Any, as_admin: Caller) -> None:
    as_admin(case)


# --- Inputs that once caused a 500 (random generation reaches them only rarely) --------

NODE = local_node_group("nul-01")
ONCE_SERVER_ERRORS = [
    # PostgreSQL refuses UTC offsets beyond +-15:59; year 1 at +05:00 does not exist in UTC.
    pytest.param("get", "/api/v1/jobs/?submitted_after=0323-11-24T16:40:28%2B23:36", None, 200, id="utc-offset"),
    pytest.param("get", "/api/v1/jobs/?submitted_before=0001-01-01T00:00:00%2B05:00", None, 400, id="before-year-1"),
    # "²".isdigit() is true, but int("²") fails.
    pytest.param("get", "/api/v1/jobs/{job}/log/?max_bytes=%C2%B2", None, 400, id="superscript-digit"),
    # PostgreSQL refuses NUL in jsonb and in a text lookup; in a file path it is a ValueError.
    pytest.param("post", "/api/v1/quotas/", {"account": "other", "max_gpus_per_model": {"\x00": 1}}, 400, id="nul-key"),
    pytest.param(
        "post",
        "/api/v1/clusters/",
        {"name": "n", "config": {"nodes": [NODE], "state_dir": "\x00"}},
        400,
        id="nul-value",
    ),
    pytest.param("post", "/api/v1/clusters/", {"name": "n", "config": {"nodes_file": "\x00"}}, 400, id="nul-path"),
    pytest.param("post", "/api/v1/qos/", {"name": "n", "may_preempt": ["normal\x00"]}, 400, id="nul-slug"),
    # Refused by Django or by the JSON decoder rather than by DRF: still JSON, and never a 500.
    pytest.param("get", "/api/v1/jobs/1.5/", None, 404, id="dotted-id"),
    pytest.param(
        "post",
        "/api/v1/jobs/",
        {"name": "big", "script": "é" * 999_999, "walltime_seconds": 60},
        413,
        id="body-too-large",
    ),
    pytest.param("post", "/api/v1/jobs/", "[" * 100_000 + "]" * 100_000, 400, id="nested-too-deep"),
]


@pytest.mark.parametrize("method,url,body,status", ONCE_SERVER_ERRORS)
def test_inputs_that_once_caused_server_errors(fuzz_world, client_for, method, url, body, status):
    job = Job.objects.get(name="pending")
    data = body if isinstance(body, str) else json.dumps(body)
    kwargs = {"data": data, "content_type": "application/json"} if body is not None else {}
    response = getattr(client_for(fuzz_world.admin), method)(url.format(job=job.pk), **kwargs)
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
