"""Fuzz the whole API from its own OpenAPI schema, as a researcher and as an admin.

Schemathesis turns every operation of ``/api/schema/`` into a test and sends generated
requests (valid and invalid bodies, odd path and query values) through the WSGI app
with a real API token. Every answer must hold to the contract:

- no 5xx, whatever was sent;
- the status code is one the schema documents, with the documented content type;
- the body matches the documented schema.

Each operation starts from the personas plus a QOS, quotas and jobs in several states.
Path ids are often those of existing rows and names (accounts, users, QOS, GPU models)
often real ones, so detail endpoints and writes are reached instead of answering 404 or
400 every time; the operations that must succeed for a persona are checked to have
answered 2xx at least once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from portal import services as portal_services
from portal.models import Account, ApiToken, Membership, Qos, Quota
from portal.wsgi import application
from scheduler import services
from scheduler.models import Cluster, Gpu, Job, Node
from tests.builders import MODELS, submit

pytestmark = pytest.mark.django_db

#: Generated requests per operation and mode (the explicit and boundary cases come on top).
MAX_EXAMPLES = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: How often a name in a body or filter is one that exists (users, accounts, QOS...).
REAL_NAME_PROBABILITY = 0.5

#: The collection behind each ``{id}`` path, to pick ids of rows that exist.
COLLECTIONS = {
    "accounts": Account, "memberships": Membership, "qos": Qos, "quotas": Quota, "tokens": ApiToken,
    "jobs": Job, "nodes": Node, "gpus": Gpu, "clusters": Cluster,
}
#: Operations that must answer 2xx at least once in a persona's run.
MUST_SUCCEED = {
    "alice": {"POST /api/v1/jobs/", "GET /api/v1/jobs/", "GET /api/v1/jobs/{id}/", "GET /api/v1/accounts/{id}/",
              "POST /api/v1/tokens/"},
    "admin": {"POST /api/v1/jobs/", "GET /api/v1/nodes/{id}/", "POST /api/v1/accounts/", "PATCH /api/v1/qos/{id}/"},
}

NAMES = {
    "accounts": ["lab", "other"],
    "users": ["alice", "bob", "dora", "charlie", "admin"],
    "qos": ["normal", "high"],
    "clusters": ["test"],
    "gpu_models": sorted(MODELS),
}


def _bind(dictionary: str) -> dict[str, Any]:
    return {"dictionary": dictionary, "probability": REAL_NAME_PROBABILITY}


CONFIG = schemathesis.Config.from_dict(
    {
        "dictionaries": {name: {"values": values} for name, values in NAMES.items()},
        "parameters": {
            "query.account": _bind("accounts"),
            "query.owner": _bind("users"),
            "query.cluster": _bind("clusters"),
            "body.account": _bind("accounts"),
            "body.parent": _bind("accounts"),
            "body.user": _bind("users"),
            "body.qos": _bind("qos"),
            "body.may_preempt[*]": _bind("qos"),
            "body.gpu_model": _bind("gpu_models"),
        },
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
    }
)
# Loading only renders the schema (anonymous, no database).
schema = schemathesis.openapi.from_wsgi("/api/schema/", application, config=CONFIG)


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Half the time, aim an integer ``{id}`` at a row of the right collection that exists."""
    collection = context.operation.path.removeprefix("/api/v1/").split("/")[0]
    model = COLLECTIONS.get(collection)
    if model is None or not isinstance(path_parameters.get("id"), int):
        return st.just(path_parameters)
    ids = list(model.objects.values_list("pk", flat=True))
    if not ids:
        return st.just(path_parameters)
    return st.one_of(st.just(path_parameters), st.sampled_from(ids).map(lambda pk: {**path_parameters, "id": pk}))


@pytest.fixture(autouse=True)
def _one_connection_per_test() -> Iterator[None]:
    """Keep the test's connection open across requests, as Django's test client does.

    Through the real WSGI app every request ends with ``close_old_connections``, which
    would close the connection that holds the test transaction.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_world(world: Any) -> Any:
    """The personas, plus QOS, quotas and jobs in several states (one placed on the cluster)."""
    Qos.objects.create(name="normal", max_walltime_seconds=7 * 24 * 3600)
    Qos.objects.create(name="high", priority=100)
    Quota.objects.create(account=world.lab, max_gpus=16, max_gpus_per_model={"H100-80GB": 8}, max_pending_jobs=50)
    Quota.objects.create(user=world.bob, max_running_jobs=4)
    submit(world.alice, world.lab, name="placed")
    services.run_tick()  # the job is placed, so the cluster is in use
    services.hold_job(submit(world.alice, world.lab, name="held"), by="alice")
    services.cancel_job(submit(world.alice, world.lab, name="cancelled"), by="alice")
    submit(world.alice, world.lab, name="pending")
    submit(world.charlie, world.other, name="charlies")
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
        response = case.call(headers={"Authorization": self._authorization()})
        self.seen[(f"{case.method.upper()} {case.operation.path}", response.status_code)] += 1
        case.validate_response(response, checks=CHECKS)

    def succeeded(self, operation: str) -> bool:
        return any(200 <= status < 300 for (label, status) in self.seen if label == operation)


def _caller(user: Any) -> Iterator[Caller]:
    caller = Caller(user)
    yield caller
    # Reaching only 4xx answers would test little: some operations must get through.
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
