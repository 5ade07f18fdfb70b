"""One list of quota limits (``people.limits.QUOTA_LIMITS``): every limit field of the
``Quota`` model is on it and nothing else is, and every limit on it is accepted and shown
by the API, offered and saved by the staff form, recorded by the audit log, loaded into
the core's ``Limits`` and tried by a preview, or named as deliberately not, with a reason.

Personas (tests/conftest.py): admin is staff; lab is alice's account.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.db import models
from django.test import Client

from people.api.serializers import QuotaSerializer
from people.limits import CORE_LIMITS, LIMIT_NAMES, PREVIEW_LIMITS, QUOTA_LIMITS, USER_LIMITS, WHOLE_LIMITS
from people.models import Quota
from people.services import audit_state
from scheduler.api.simulations import PreviewRequestSerializer
from scheduler.core.types import Limits
from scheduler.tick.snapshot import load_limits
from web.manage.simulation_forms import PreviewForm

pytestmark = pytest.mark.django_db

NOT_LIMITS = {"id", "account", "user"}


def every_limit_set() -> dict[str, Any]:
    """A value for every limit, each different (11, 12, ...; the per-model map one model),
    and max GPUs above the guarantee and borrowing together (as a quota must have them)."""
    values = {limit.name: {"H100-80GB": 11 + i} if limit.per_model else 11 + i for i, limit in enumerate(QUOTA_LIMITS)}
    return {**values, "max_gpus": 100}


def staff(world) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(world.admin)
    return client


def test_every_limit_field_of_the_quota_model_is_on_the_list_and_nothing_else():
    fields = [f for f in Quota._meta.concrete_fields if f.name not in NOT_LIMITS]
    assert tuple(f.name for f in fields) == LIMIT_NAMES
    for field, limit in zip(fields, QUOTA_LIMITS, strict=True):
        assert field.null or limit.per_model, f"{limit.name}: empty must mean no limit"
        assert isinstance(field, models.JSONField) == limit.per_model, limit.name
        assert limit.unit in ("GPUs", "jobs", "seconds") and limit.label and limit.meaning, limit.name


def test_the_api_accepts_and_shows_every_limit(world):
    values = every_limit_set()
    serializer = QuotaSerializer(data={"account": "lab", **values})
    assert serializer.is_valid(), serializer.errors
    quota = serializer.save()
    assert {name: getattr(quota, name) for name in LIMIT_NAMES} == values
    assert {name: QuotaSerializer(quota).data[name] for name in LIMIT_NAMES} == values


@pytest.mark.parametrize("name", WHOLE_LIMITS)
def test_the_api_refuses_a_negative_limit_and_takes_null_for_none(world, name):
    refused = QuotaSerializer(data={"account": "lab", name: -1})
    assert not refused.is_valid() and name in refused.errors
    assert QuotaSerializer(data={"account": "lab", name: None}).is_valid()


def test_the_staff_form_offers_and_saves_every_limit(world):
    values = every_limit_set()
    Quota.objects.create(account=world.lab, max_gpus_per_model={"H100-80GB": 1})  # a field for its model
    url = f"/manage/accounts/{world.lab.id}/"
    form = staff(world).get(url).context["quota_form"]
    assert {name for name in WHOLE_LIMITS if name in form.fields} == set(WHOLE_LIMITS)
    post = {name: str(values[name]) for name in WHOLE_LIMITS}
    post[form.model_field("H100-80GB")] = str(values["max_gpus_per_model"]["H100-80GB"])
    response = staff(world).post(url, {"form": "quota", **post})
    assert response.status_code == 302
    quota = Quota.objects.get(account=world.lab)
    assert {name: getattr(quota, name) for name in LIMIT_NAMES} == values


def test_a_users_quota_form_offers_the_user_limits_only(world):
    form = staff(world).get(f"/manage/users/{world.alice.id}/").context["quota_form"]
    assert {name for name in WHOLE_LIMITS if name in form.fields} == set(WHOLE_LIMITS) & set(USER_LIMITS)
    assert set(LIMIT_NAMES) - set(USER_LIMITS) == {"guaranteed_gpus", "borrowing_limit_gpus"}


def test_the_audit_log_records_every_limit(world):
    quota = Quota.objects.create(account=world.lab, **every_limit_set())
    state = audit_state(quota)
    assert {name: state[name] for name in LIMIT_NAMES} == every_limit_set()


def test_the_core_limits_are_the_fields_of_limits_and_the_rest_say_why_not():
    assert {f.name for f in dataclasses.fields(Limits)} == set(CORE_LIMITS)
    for limit in QUOTA_LIMITS:
        assert (limit.name in CORE_LIMITS) == (not limit.not_in_core), limit.name
    assert [limit.name for limit in QUOTA_LIMITS if limit.not_in_core] == ["max_pending_jobs"]


def test_the_tick_loads_every_core_limit(world):
    values = every_limit_set()
    Quota.objects.create(account=world.lab, **values)
    Quota.objects.create(user=world.alice, max_running_jobs=3)
    accounts, users = load_limits()
    assert accounts["lab"] == Limits(**{name: values[name] for name in CORE_LIMITS})
    assert users["alice"] == Limits(max_running_jobs=3)


def test_a_preview_may_try_each_previewable_limit_and_the_rest_say_why_not():
    assert set(PREVIEW_LIMITS) <= set(CORE_LIMITS) & set(WHOLE_LIMITS)  # a preview replaces Limits fields
    for limit in QUOTA_LIMITS:
        body = PreviewRequestSerializer(data={"limits": {limit.name: 3}})
        if limit.name in PREVIEW_LIMITS:
            assert body.is_valid(), (limit.name, body.errors)
            assert not limit.not_previewed
        else:
            assert not body.is_valid() and "limits" in body.errors, limit.name
            assert limit.not_previewed, f"{limit.name}: say why a preview may not try it"


def test_the_account_pages_preview_form_offers_previewable_limits_only():
    offered = {name for name in PreviewForm().fields if name in LIMIT_NAMES}
    assert offered and offered <= set(PREVIEW_LIMITS)
    form = PreviewForm(data={"days": 7, **dict.fromkeys(offered, 5)})
    assert form.is_valid(), form.errors
    assert form.body()["limits"] == dict.fromkeys(offered, 5)


CONTRADICTIONS = [
    pytest.param(
        {"max_gpus": 8, "guaranteed_gpus": 24, "borrowing_limit_gpus": 16},
        "guaranteed_gpus",
        "24 guaranteed GPUs is more than the 8 GPUs it may use at most (max GPUs), so the guarantee could never be "
        "used: guarantee at most 8, or raise max GPUs.",
        id="guarantee above the cap (the issue's 8 / 24 / 16)",
    ),
    pytest.param(
        {"max_gpus": 8, "guaranteed_gpus": 6, "borrowing_limit_gpus": 4},
        "borrowing_limit_gpus",
        "6 guaranteed plus 4 borrowed GPUs is more than the 8 GPUs it may use at most (max GPUs), so it could "
        "borrow 2 at most: set the borrowing limit to at most 2, or raise max GPUs.",
        id="borrowing past the cap",
    ),
]


@pytest.mark.parametrize(("limits", "field", "reason"), CONTRADICTIONS)
def test_the_api_refuses_limits_that_contradict_each_other_and_says_why(world, client_for, limits, field, reason):
    response = client_for(world.admin).post("/api/v1/quotas/", {"account": "lab", **limits}, format="json")
    assert response.status_code == 400 and response.json() == {field: [reason]}
    assert not Quota.objects.exists()


def test_a_change_that_contradicts_the_saved_limits_is_refused_too(world, client_for):
    quota = Quota.objects.create(account=world.lab, max_gpus=8, guaranteed_gpus=4)
    response = client_for(world.admin).patch(f"/api/v1/quotas/{quota.id}/", {"max_gpus": 2}, format="json")
    assert response.status_code == 400 and "guaranteed_gpus" in response.json()
    quota.refresh_from_db()
    assert quota.max_gpus == 8


@pytest.mark.parametrize(("limits", "field", "reason"), CONTRADICTIONS)
def test_the_staff_form_shows_the_reason_on_the_field(world, limits, field, reason):
    response = staff(world).post(
        f"/manage/accounts/{world.lab.id}/", {"form": "quota", **{k: str(v) for k, v in limits.items()}}
    )
    assert response.status_code == 200
    assert response.context["quota_form"].errors[field] == [reason]
    assert not Quota.objects.exists()


@pytest.mark.parametrize(
    "limits",
    [
        {"max_gpus": 8, "guaranteed_gpus": 8},
        {"max_gpus": 8, "guaranteed_gpus": 4, "borrowing_limit_gpus": 4},
        {"max_gpus": 8, "guaranteed_gpus": 4},  # borrowing: up to what is idle, within the cap
        {"guaranteed_gpus": 24, "borrowing_limit_gpus": 16},  # no cap
    ],
)
def test_limits_that_agree_are_saved(world, limits):
    serializer = QuotaSerializer(data={"account": "lab", **limits})
    assert serializer.is_valid(), serializer.errors
