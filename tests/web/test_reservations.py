"""The reservation pages (/manage/reservations/): staff make, change and delete
reservations and maintenance windows with the API's rules; the nodes page and the
cluster overview show what is ahead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from people.models import AuditEntry
from scheduler.models import Reservation
from tests.builders import queue_behind_a_running_job

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


# --- Preview cost: what a window would cost the queue, before it is saved -----------------

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def at(hours: float) -> str:
    return (NOW + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


@pytest.fixture
def queue(world):
    import time_machine

    with time_machine.travel(NOW, tick=False):
        yield queue_behind_a_running_job(world, NOW)


MAINT = {**FORM, "nodes": "h100-01", "action": "preview"}


def test_preview_cost_lists_the_job_a_window_delays_and_the_gpu_hours_displaced_and_saves_nothing(world, queue):
    # Maintenance on h100-01 from +1 h to +5 h: the waiting job goes from +2 h to +5 h
    # (8 GPUs x 3 h), and the running job's last hour falls inside (8 GPUs x 1 h).
    response = logged_in(world.admin).post("/manage/reservations/", {**MAINT, "start_at": at(1), "end_at": at(5)})
    assert response.status_code == 200
    assert not Reservation.objects.exists()
    preview = response.context["preview"]
    (delay,) = preview["delays"]
    assert (delay["job_id"], delay["name"], delay["owner"], delay["delay_s"]) == (
        queue["waiting"].id,
        "finetune",
        "alice",
        3 * 3600,
    )
    assert preview["cost"]["gpu_hours"] == pytest.approx(32)
    assert [o.job_id for o in preview["overruns"]] == [queue["running"].id]
    page = response.content.decode()
    row = page[page.index(f'id="delayed-{queue["waiting"].id}"') :].split("</tr>")[0]
    assert "finetune" in row and "<td>3h</td>" in row and "<td>24.0</td>" in row
    assert "32.0 GPU-hours displaced" in page
    assert 'id="cost-suggestion"' not in page  # no range asked


def test_preview_cost_suggests_the_start_in_the_range_that_displaces_least_and_one_click_uses_it(world, queue):
    client = logged_in(world.admin)
    body = {**MAINT, "start_at": at(1), "end_at": at(5), "suggest_from": at(1), "suggest_until": at(8)}
    suggestion = client.post("/manage/reservations/", body).context["preview"]["suggestion"]
    # From +4 h the running job and the waiting one planned after it have both ended.
    assert (suggestion["start_at"], suggestion["gpu_hours"]) == (NOW + timedelta(hours=4), 0)
    assert suggestion["fields"]["start_at"] == at(4) and suggestion["fields"]["end_at"] == at(8)
    used = client.post("/manage/reservations/", {**suggestion["fields"], "action": "preview"})
    assert used.context["form"]["start_at"].value() == at(4)
    assert used.context["preview"]["cost"]["gpu_hours"] == 0 and not used.context["preview"]["delays"]
    assert not Reservation.objects.exists()
    made = client.post("/manage/reservations/", {**suggestion["fields"], "action": "save"})
    assert made.status_code == 302 and Reservation.objects.get().start_at == NOW + timedelta(hours=4)


def test_preview_cost_on_a_saved_window_measures_it_against_the_world_without_it(world, queue):
    client = logged_in(world.admin)
    client.post("/manage/reservations/", {**MAINT, "action": "save", "start_at": at(1), "end_at": at(5)})
    made = Reservation.objects.get()
    response = client.post(f"/manage/reservations/{made.pk}/", {**MAINT, "start_at": at(1), "end_at": at(5)})
    assert response.context["preview"]["cost"]["gpu_hours"] == pytest.approx(32)
    assert "Preview cost" in response.content.decode()


def test_a_researcher_may_not_preview_a_windows_cost(world, queue):
    response = logged_in(world.alice).post("/manage/reservations/", {**MAINT, "start_at": at(1), "end_at": at(5)})
    assert response.status_code == 403


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        ({"start_at": at(5), "end_at": at(1)}, "end_at", "after start_at"),
        ({"suggest_from": at(6), "suggest_until": at(2)}, "suggest_until", "the range is empty"),
        ({"suggest_from": at(2), "suggest_until": at(2)}, "suggest_until", "the range is empty"),
        ({"suggest_from": at(2)}, "suggest_until", "Give both ends"),
        ({"nodes": "nowhere"}, "nodes", "nowhere"),
    ],
)
def test_a_bad_preview_is_a_form_error_and_plans_nothing(world, queue, changes, field, fragment):
    body = {**MAINT, "start_at": at(1), "end_at": at(5), **changes}
    response = logged_in(world.admin).post("/manage/reservations/", body)
    assert response.status_code == 200 and response.context["preview"] is None
    assert fragment in " ".join(response.context["form"].errors[field])
