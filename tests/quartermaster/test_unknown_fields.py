"""A field the portal does not know is a 400 naming it, never a silent success: with the
field it probably meant, or saying a Slurm option is not supported yet."""

from __future__ import annotations

from typing import Any

import pytest

from people.models import Account
from scheduler.models import Job

pytestmark = pytest.mark.django_db

JOB = {"name": "train", "command": "true", "walltime_seconds": 600}


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"gpus": 8}, "gpus", "Slurm's name for it; here it is 'gpus_per_node'"),
        ({"gpu_modle": "H100-80GB"}, "gpu_modle", "did you mean 'gpu_model'?"),
        ({"begin": "now+1hour"}, "begin", "Not supported yet: a deferred start"),
        ({"exclusive": True}, "exclusive", "Not supported yet: exclusive nodes"),
        ({"walltime": "2h"}, "walltime", "'walltime_seconds'"),
        ({"colour": "blue"}, "colour", "this endpoint takes:"),
    ],
    ids=["Slurm's gpus", "misspelled", "begin", "exclusive", "walltime", "nonsense"],
)
def test_an_unknown_submit_field_is_a_400_naming_it(world, client_for, extra: dict[str, Any], field, words):
    response = client_for(world.alice).post("/api/v1/jobs/", {**JOB, **extra}, format="json")

    assert response.status_code == 400
    assert words in response.json()[field][0]
    assert not Job.objects.exists()


def test_every_unknown_field_is_named_at_once_and_nested_ones_too(world, client_for):
    body = {**JOB, "gpus": 2, "nodez": 1, "dependencies": [{"type": "afterok", "job": 1, "kind": "x"}]}
    response = client_for(world.alice).post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 400
    errors = response.json()
    assert {"gpus", "nodez", "dependencies"} <= set(errors)
    assert "did you mean 'nodes'?" in errors["nodez"][0]


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("post", "/api/v1/accounts/", {"name": "new", "share": 3}, "share"),
        ("patch", "/api/v1/accounts/{lab}/", {"shars": 3}, "shars"),
        ("post", "/api/v1/quotas/", {"account": "lab", "max_gpu": 4}, "max_gpu"),
        ("post", "/api/v1/memberships/", {"user": "dora", "account": "other", "rol": "member"}, "rol"),
        ("post", "/api/v1/qos/", {"name": "q", "priorty": 5}, "priorty"),
        ("post", "/api/v1/identities/", {"user": "dora", "username": "dora", "uid_number": 5000}, "uid_number"),
    ],
    ids=["account create", "account update", "quota", "membership", "qos", "identity"],
)
def test_every_write_endpoint_refuses_unknown_fields(world, client_for, method, url, body, field):
    lab = Account.objects.get(name="lab")
    response = getattr(client_for(world.admin), method)(url.format(lab=lab.pk), body, format="json")

    assert response.status_code == 400, response.json()
    assert field in response.json()
    lab.refresh_from_db()
    assert lab.shares == 1 and not Account.objects.filter(name="new").exists()


def test_a_token_request_with_an_unknown_field_is_refused(world, client_for):
    response = client_for(world.alice).post("/api/v1/tokens/", {"name": "ci", "expires": 30}, format="json")
    assert response.status_code == 400 and "did you mean 'expires_in_days'?" in response.json()["expires"][0]
