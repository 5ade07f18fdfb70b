"""The reservation pages (/manage/reservations/): staff make, change and delete
reservations and maintenance windows with the API's rules; the nodes page and the
cluster overview show what is ahead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from people.models import AuditEntry
from scheduler.models import Reservation

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def typed(hours: float) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


FORM = {"name": "fw", "kind": "maintenance", "nodes": "h100-01, h100-02", "accounts": "", "users": ""}


def test_only_staff_see_the_reservation_pages(world):
    assert logged_in(world.alice).get("/manage/reservations/").status_code == 403
    assert logged_in(world.admin).get("/manage/reservations/").status_code == 200


def test_staff_make_a_window_that_the_nodes_page_and_the_overview_show(world):
    client = logged_in(world.admin)
    response = client.post("/manage/reservations/", {**FORM, "start_at": typed(2), "end_at": typed(6)})
    assert response.status_code == 302
    made = Reservation.objects.get()
    assert sorted(made.nodes.values_list("name", flat=True)) == ["h100-01", "h100-02"]
    assert AuditEntry.objects.filter(action="reserve", actor=world.admin).exists()
    assert 'id="reservation-fw"' in client.get("/manage/reservations/").content.decode()
    nodes = client.get("/manage/nodes/").content.decode()
    row = nodes[nodes.index('id="node-h100-01"') :].split("</tr>")[0]
    assert ">fw</a> (maintenance)" in row
    assert ">fw</a>" not in nodes[nodes.index('id="node-l4-01"') :].split("</tr>")[0]
    assert ">fw</a>" in client.get("/manage/cluster/").content.decode()


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        ({"end_at": typed(1), "start_at": typed(3)}, "end_at", "after start_at"),
        ({"nodes": "nowhere"}, "nodes", "nowhere"),
        ({"accounts": "lab"}, "accounts", "for no one"),
        ({"kind": "accounts"}, "accounts", "Name the accounts"),
    ],
)
def test_a_bad_form_shows_the_apis_error_on_its_field_and_saves_nothing(world, changes, field, fragment):
    body = {**FORM, "start_at": typed(2), "end_at": typed(6), **changes}
    response = logged_in(world.admin).post("/manage/reservations/", body)
    assert response.status_code == 200
    assert fragment in " ".join(response.context["form"].errors[field])
    assert not Reservation.objects.exists()


def test_staff_change_and_delete_a_reservation(world):
    client = logged_in(world.admin)
    client.post("/manage/reservations/", {**FORM, "start_at": typed(2), "end_at": typed(6)})
    made = Reservation.objects.get()
    form = client.get(f"/manage/reservations/{made.pk}/").context["form"]
    assert form.initial["nodes"] == "h100-01, h100-02"
    changed = {**form.initial, "kind": "accounts", "accounts": "lab", "nodes": "l4-01"}
    assert client.post(f"/manage/reservations/{made.pk}/", changed).status_code == 302
    made.refresh_from_db()
    assert (made.kind, list(made.nodes.values_list("name", flat=True))) == ("accounts", ["l4-01"])
    assert list(made.accounts.values_list("name", flat=True)) == ["lab"]
    assert client.post(f"/manage/reservations/{made.pk}/delete/").status_code == 302
    assert not Reservation.objects.exists()


def test_staff_reserve_a_number_of_gpus_of_a_model_and_the_nodes_are_chosen(world):
    client = logged_in(world.admin)
    body = {**FORM, "nodes": "", "gpus": "16", "gpu_model": "H100-80GB", "start_at": typed(2), "end_at": typed(6)}
    assert client.post("/manage/reservations/", body).status_code == 302
    made = Reservation.objects.get()
    assert (made.gpus, made.gpu_model) == (16, "H100-80GB")
    assert sorted(made.nodes.values_list("name", flat=True)) == ["h100-01", "h100-02"]
    assert "16 x H100-80GB on h100-01, h100-02" in client.get("/manage/reservations/").content.decode()
