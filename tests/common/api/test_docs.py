"""The API's schema and Swagger UI are for signed-in users (a session or an API token)
unless ``API_SCHEMA_PUBLIC`` opens them: an anonymous script gets the API's 401, an
anonymous browser the sign-in page that brings it back."""

from __future__ import annotations

import pytest
from django.test import Client

from people.services import create_api_token

SCHEMA, DOCS = "/api/schema/", "/api/docs/"


def test_anonymous_callers_get_no_schema(db):
    response = Client().get(SCHEMA)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "credentials" in response.json()["detail"]


def test_an_anonymous_browser_is_sent_to_sign_in_and_back(db):
    response = Client().get(DOCS)
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/api/docs/"


def test_a_signed_in_researcher_reads_both(world):
    client = Client()
    client.force_login(world.alice)
    schema = client.get(SCHEMA, HTTP_ACCEPT="application/json")
    assert schema.status_code == 200 and "/api/v1/jobs/" in schema.json()["paths"]
    docs = client.get(DOCS)
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_an_api_token_reads_the_schema(world):
    _, secret = create_api_token(world.alice, "schema")
    response = Client().get(SCHEMA, HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response.json()["info"]["title"] == "Quartermaster API"


def test_a_revoked_or_wrong_token_reads_nothing(world):
    response = Client().get(SCHEMA, HTTP_AUTHORIZATION="Bearer not-a-token")
    assert response.status_code == 401


@pytest.mark.parametrize("url", [SCHEMA, DOCS])
def test_api_schema_public_opens_both_to_anyone(db, settings, url):
    settings.API_SCHEMA_PUBLIC = True
    assert Client().get(url).status_code == 200
