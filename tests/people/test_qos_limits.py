"""One list of QOS limits (``people.limits.QOS_LIMITS``): every limit field of the ``Qos``
model is on it and nothing else is, and every one is accepted, validated and shown by the
API, edited in the Django admin (the staff's QOS page), and loaded into the core's
``QosLimits`` or named as checked at submission.

Personas (tests/conftest.py): admin is staff; alice is not.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.test import Client

from people.admin import QosAdmin
from people.api.serializers import QosSerializer
from people.limits import QOS_LIMIT_NAMES, QOS_LIMITS
from people.models import Qos
from scheduler.core.types import CPU_MILLIS, QosLimits
from scheduler.tick.snapshot import load_qos_limits

pytestmark = pytest.mark.django_db

#: The QOS fields that are not limits on what its jobs hold.
NOT_LIMITS = {"id", "name", "description", "priority", "preemptible", "max_walltime_seconds", "usage_factor"}


def every_limit_set() -> dict[str, int]:
    """A value for every limit, each different: 11, 12, ..."""
    return {name: 11 + i for i, name in enumerate(QOS_LIMIT_NAMES)}


def test_every_limit_field_of_the_qos_model_is_on_the_list_and_nothing_else() -> None:
    fields = [f for f in Qos._meta.concrete_fields if f.name not in NOT_LIMITS]
    assert tuple(f.name for f in fields) == QOS_LIMIT_NAMES
    for field, limit in zip(fields, QOS_LIMITS, strict=True):
        assert field.null, f"{limit.name}: empty must mean no limit"
        assert field.verbose_name == limit.label and limit.meaning in field.help_text
        assert limit.unit in ("GPUs", "CPUs", "jobs") and limit.slurm and limit.reason.startswith("QOS")


def test_the_core_enforces_every_limit_but_the_submit_limit_and_has_no_other() -> None:
    enforced = {limit.core for limit in QOS_LIMITS if limit.core}
    assert enforced == {f.name for f in dataclasses.fields(QosLimits)}
    assert [limit.name for limit in QOS_LIMITS if not limit.core] == ["max_submitted_jobs_per_user"]


def test_the_tick_loads_every_enforced_limit_cpus_as_millicores() -> None:
    Qos.objects.create(name="debug", **every_limit_set())
    Qos.objects.create(name="normal")
    assert load_qos_limits() == {
        "debug": QosLimits(
            max_gpus_per_user=11, max_cpu_millis_per_user=12 * CPU_MILLIS, max_running_jobs_per_user=13, max_gpus=15
        )
    }


def test_the_api_accepts_and_shows_every_limit(world: Any, client_for: Any) -> None:
    values = every_limit_set()
    response = client_for(world.admin).post("/api/v1/qos/", {"name": "debug", **values}, format="json")
    assert response.status_code == 201, response.json()
    debug = Qos.objects.get(name="debug")
    assert {name: getattr(debug, name) for name in QOS_LIMIT_NAMES} == values
    shown = client_for(world.alice).get(f"/api/v1/qos/{debug.pk}/").json()
    assert {name: shown[name] for name in QOS_LIMIT_NAMES} == values


def test_an_empty_limit_is_no_limit(world: Any, client_for: Any) -> None:
    response = client_for(world.admin).post("/api/v1/qos/", {"name": "open"}, format="json")
    assert response.status_code == 201
    assert all(response.json()[name] is None for name in QOS_LIMIT_NAMES)


@pytest.mark.parametrize("name", QOS_LIMIT_NAMES)
@pytest.mark.parametrize("bad", [-1, 2**31, "two", 1.5])
def test_a_bad_limit_is_a_400_naming_its_field(world: Any, client_for: Any, name: str, bad: object) -> None:
    response = client_for(world.admin).post("/api/v1/qos/", {"name": "debug", name: bad}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [name]
    assert not Qos.objects.filter(name="debug").exists()


def test_only_staff_set_limits(world: Any, client_for: Any) -> None:
    debug = Qos.objects.create(name="debug")
    response = client_for(world.alice).patch(f"/api/v1/qos/{debug.pk}/", {"max_gpus_per_user": 100}, format="json")
    assert response.status_code == 403
    debug.refresh_from_db()
    assert debug.max_gpus_per_user is None


def test_the_openapi_schema_describes_every_limit() -> None:
    serializer = QosSerializer()
    for limit in QOS_LIMITS:
        field = serializer.fields[limit.name]
        assert field.help_text is not None
        help_text = str(field.help_text)  # a lazy translation reads as the text it stands for
        assert limit.meaning in help_text and limit.slurm in help_text
        assert field.allow_null and not field.required


# --- The staff's QOS page (the Django admin) ----------------------------------------------


def staff(world: Any) -> Client:
    world.admin.is_superuser = True
    world.admin.save(update_fields=["is_superuser"])
    client = Client()
    client.force_login(world.admin)
    return client


def qos_form(**values: Any) -> dict[str, Any]:
    return {"name": "debug", "description": "", "priority": "0", "usage_factor": "1.0", "max_walltime_seconds": ""} | (
        dict.fromkeys(QOS_LIMIT_NAMES, "") | values
    )


def test_the_qos_page_offers_every_limit_under_limits_with_its_label_and_meaning(world: Any) -> None:
    page = staff(world).get("/admin/portal/qos/add/").content.decode()
    assert "Limits (empty: no limit)" in page
    for limit in QOS_LIMITS:
        assert f'<label for="id_{limit.name}">{limit.label}:</label>' in page
        assert f'name="{limit.name}"' in page
        assert limit.meaning in page
    assert [name for _, options in QosAdmin.fieldsets for name in options["fields"] if name in QOS_LIMIT_NAMES] == (
        list(QOS_LIMIT_NAMES)
    )


def test_the_qos_page_saves_the_debug_lane_and_lists_its_limits(world: Any) -> None:
    client = staff(world)
    response = client.post("/admin/portal/qos/add/", qos_form(max_gpus_per_user="2", max_running_jobs_per_user="2"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    debug = Qos.objects.get(name="debug")
    assert (debug.max_gpus_per_user, debug.max_running_jobs_per_user, debug.max_gpus) == (2, 2, None)

    response = client.post(f"/admin/portal/qos/{debug.pk}/change/", qos_form(max_gpus_per_user="", max_gpus="8"))
    assert response.status_code == 302
    debug.refresh_from_db()
    assert (debug.max_gpus_per_user, debug.max_running_jobs_per_user, debug.max_gpus) == (None, None, 8)

    listing = client.get("/admin/portal/qos/").content.decode()
    for limit in QOS_LIMITS:
        assert f"column-{limit.name}" in listing


def test_the_qos_page_refuses_a_negative_limit_with_a_form_error(world: Any) -> None:
    response = staff(world).post("/admin/portal/qos/add/", qos_form(max_cpus_per_user="-4"))
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["max_cpus_per_user"]
    assert not Qos.objects.filter(name="debug").exists()
