"""Personal API tokens: created and revoked by their user, stored hashed, shown once."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from people.models import ApiToken

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_token_lifecycle(world, client_for):
    session = client_for(world.alice)
    created = session.post("/api/v1/tokens/", {"name": "laptop"}).json()
    secret = created["token"]

    assert bearer(secret).get("/api/v1/me/").json()["username"] == "alice"
    stored = ApiToken.objects.get(pk=created["id"])
    assert secret not in (stored.digest, stored.key_prefix) and stored.digest == ApiToken.hash(secret)
    assert "token" not in session.get(f"/api/v1/tokens/{created['id']}/").json()

    assert session.delete(f"/api/v1/tokens/{created['id']}/").status_code == 204
    assert bearer(secret).get("/api/v1/me/").status_code == 401


def test_tokens_are_private_to_their_user(world, client_for):
    created = client_for(world.alice).post("/api/v1/tokens/", {"name": "laptop"}).json()
    assert client_for(world.bob).get(f"/api/v1/tokens/{created['id']}/").status_code == 404
    assert client_for(world.bob).delete(f"/api/v1/tokens/{created['id']}/").status_code == 404


@pytest.mark.parametrize("header", ["Bearer nope", "Bearer qm_abc_def", "Bearer qm_", "Bearer a b"])
def test_bad_tokens_are_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert client.get("/api/v1/me/").status_code == 401


def test_a_token_cannot_mint_tokens_so_revoking_it_locks_its_holder_out(world, client_for):
    secret = client_for(world.alice).post("/api/v1/tokens/", {"name": "laptop"}).json()["token"]

    refused = bearer(secret).post("/api/v1/tokens/", {"name": "child"})

    assert refused.status_code == 403 and "signed-in session" in refused.json()["detail"]
    assert ApiToken.objects.count() == 1


def test_an_expired_token_no_longer_works_and_says_so(world, client_for):
    from datetime import timedelta

    from django.utils import timezone

    created = client_for(world.alice).post("/api/v1/tokens/", {"name": "ci", "expires_in_days": 30}).json()
    token = ApiToken.objects.get(pk=created["id"])
    assert token.expires_at is not None and abs(token.expires_at - timezone.now() - timedelta(days=30)) < timedelta(
        minutes=1
    )
    assert bearer(created["token"]).get("/api/v1/me/").status_code == 200

    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = bearer(created["token"]).get("/api/v1/me/")

    assert expired.status_code == 401 and "expired" in expired.json()["detail"]


def test_a_read_only_token_reads_and_never_writes(world, client_for):
    secret = client_for(world.alice).post("/api/v1/tokens/", {"name": "grafana", "read_only": True}).json()["token"]
    reader = bearer(secret)

    assert reader.get("/api/v1/jobs/").status_code == 200
    body = {"name": "x", "command": "true", "walltime_seconds": 60}
    refused = reader.post("/api/v1/jobs/", body, format="json")
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
    from scheduler.models import Job

    assert not Job.objects.exists()


def test_a_disabled_users_tokens_fail_at_once(world, client_for):
    secret = client_for(world.alice).post("/api/v1/tokens/", {"name": "laptop"}).json()["token"]
    world.alice.is_active = False
    world.alice.save()

    assert bearer(secret).get("/api/v1/me/").status_code == 401


@pytest.mark.parametrize(
    ("body", "field"), [({"name": "x", "expires_in_days": 0}, "expires_in_days"), ({"name": ""}, "name")]
)
def test_bad_token_requests_name_the_field(world, client_for, body, field):
    response = client_for(world.alice).post("/api/v1/tokens/", body)
    assert response.status_code == 400 and field in response.json()
