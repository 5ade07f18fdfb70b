"""Personal API tokens: created and revoked by their user, stored hashed, shown once."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from portal.models import ApiToken

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
