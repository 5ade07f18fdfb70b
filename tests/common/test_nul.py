"""One NUL check (``common.nul``): the form field, the serializer fields, the JSON
validator and the ingest validator each refuse a ``\\x00`` with a message that names
the field, and take the same text without it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django import forms
from rest_framework import serializers

from common.api.fields import NulFreeCharField, SlugRelatedField, TextField
from common.api.validators import no_nul_characters
from common.forms import NulFreeCharField as NulFreeFormField
from common.nul import has_nul, nul_message
from monitoring.ingest import validate_sample
from people.models import Qos
from web.manage.nodes import DrainForm

pytestmark = pytest.mark.django_db


class Body(serializers.Serializer):
    title = NulFreeCharField()
    script = TextField()
    qos = SlugRelatedField(slug_field="name", queryset=Qos.objects.all(), required=False)
    preempts = SlugRelatedField(slug_field="name", queryset=Qos.objects.all(), many=True, required=False)
    labels = serializers.DictField(required=False, validators=[no_nul_characters])


class Page(forms.Form):
    title = NulFreeFormField(label="Title")
    note = NulFreeFormField(required=False)


def test_has_nul_looks_into_strings_keys_and_items():
    assert has_nul("a\x00") and has_nul({"k\x00": 1}) and has_nul([{"k": ["v\x00"]}])
    assert not has_nul("a") and not has_nul({"k": [1, "v", None]})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "a\x00b", "script": "x"}, "title"),
        ({"title": "a", "script": "x\x00"}, "script"),
        ({"title": "a", "script": "x", "qos": "normal\x00"}, "qos"),
        ({"title": "a", "script": "x", "preempts": ["normal\x00"]}, "preempts"),
        ({"title": "a", "script": "x", "labels": {"rack": "r\x00"}}, "labels"),
        ({"title": "a", "script": "x", "labels": {"r\x00": "1"}}, "labels"),
    ],
)
def test_each_serializer_field_refuses_a_nul_naming_the_field(body: dict[str, Any], field: str):
    serializer = Body(data=body)
    assert not serializer.is_valid()
    problem = serializer.errors[field]
    message = str(problem[0] if isinstance(problem, list) else next(iter(problem.values()))[0])
    assert message == nul_message(field)


def test_the_serializer_fields_take_text_without_a_nul():
    Qos.objects.create(name="normal")
    body = {"title": "a", "script": "x\n", "qos": "normal", "preempts": ["normal"], "labels": {"rack": "r1"}}
    serializer = Body(data=body)
    assert serializer.is_valid(), serializer.errors


def test_the_form_field_refuses_a_nul_naming_the_field_by_its_label():
    form = Page(data={"title": "a\x00", "note": "b\x00"})
    assert not form.is_valid()
    assert form.errors["title"] == [nul_message("Title")]
    assert form.errors["note"] == [nul_message("Note")]
    assert Page(data={"title": "a", "note": ""}).is_valid()


def test_the_drain_form_refuses_a_nul_in_its_reason():
    form = DrainForm(data={"reason": "fan\x00"})
    assert not form.is_valid() and form.errors["reason"] == [nul_message("Reason")]
    assert DrainForm(data={"reason": "fan"}).is_valid()


def test_the_validator_called_by_hand_still_refuses():
    with pytest.raises(serializers.ValidationError):
        no_nul_characters({"a": ["\x00"]})
    no_nul_characters({"a": ["b"]})


@pytest.mark.parametrize(("field", "value"), [("uuid", "GPU-\x00"), ("throttle_reasons", ["hw\x00"])])
def test_the_ingest_validator_refuses_a_nul_in_its_text_fields(field: str, value: Any):
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    raw = {"index": 0, "at": (now - timedelta(seconds=5)).isoformat(), "memory_used_mib": 1, field: value}
    assert field in validate_sample(raw, now=now, oldest=now - timedelta(hours=1))[1]
