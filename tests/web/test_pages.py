"""Server-rendered pages: the landing page and every Django admin page load."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.builders import submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_world(world, django_capture_on_commit_callbacks):
    from scheduler.tick.run import run_tick

    world.cluster.config = {**world.cluster.config, "simulate": 60}
    world.cluster.save()
    submit(world.alice, world.lab, name="alices-train")
    submit(world.bob, world.lab, name="bobs-eval")
    with django_capture_on_commit_callbacks(execute=True):
        run_tick()
    return world


def test_home_shows_the_queue_the_user_may_see(busy_world, client):
    client.force_login(busy_world.alice)
    page = client.get("/").content.decode()
    assert "alices-train" in page and "bobs-eval" not in page
    client.force_login(busy_world.bob)  # coordinator of lab
    assert "alices-train" in client.get("/").content.decode()


def test_home_requires_login(client):
    assert client.get("/").status_code == 302


@pytest.mark.parametrize("model", list(admin.site._registry), ids=lambda m: m._meta.label)
def test_every_admin_changelist_and_change_page_loads(busy_world, client, model):
    client.force_login(busy_world.admin.__class__.objects.create_superuser("root", "root@example.org", "pw"))
    opts = model._meta
    assert client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")).status_code == 200
    obj = model.objects.first()
    if obj is not None:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        assert client.get(url).status_code == 200


def test_admin_job_actions_go_through_services(busy_world, client):
    from scheduler.models import Job

    client.force_login(busy_world.admin.__class__.objects.create_superuser("root", "root@example.org", "pw"))
    job = Job.objects.get(name="alices-train")
    response = client.post(
        reverse("admin:scheduler_job_changelist"), {"action": "cancel", "_selected_action": [job.pk]}, follow=True
    )
    assert response.status_code == 200
    job.refresh_from_db()
    assert job.state == "CANCELLED"
    assert job.events.filter(kind="cancelled", message__contains="root").exists()


def test_favicon_ico_answers_with_the_portals_icon(client):
    from django.contrib.staticfiles import finders

    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/favicon.svg")
    assert finders.find("favicon.svg")
    assert 'rel="icon"' in client.get("/login/").content.decode()


@pytest.mark.parametrize("model", list(admin.site._registry), ids=lambda m: m._meta.label)
def test_admin_names_each_model_in_plain_english(model):
    opts = model._meta
    singular, plural = str(opts.verbose_name), str(opts.verbose_name_plural)
    if singular.endswith("y") and singular[-2:-1] not in "aeiou":
        assert plural.endswith("ies"), f"{opts.label}: {plural!r}"  # not "identitys"


def test_admin_cannot_delete_jobs_or_their_history_behind_the_state_machine(busy_world, client):
    """A job leaves the queue through cancel (the backend is told, the event recorded),
    never through the admin's delete, which would leave its processes running."""
    from scheduler.models import Job, JobEvent

    client.force_login(busy_world.admin.__class__.objects.create_superuser("root", "root@example.org", "pw"))
    page = client.get(reverse("admin:scheduler_job_changelist")).content.decode()
    assert 'value="delete_selected"' not in page and 'value="cancel"' in page
    job = Job.objects.get(name="alices-train")
    assert client.get(reverse("admin:scheduler_job_delete", args=[job.pk])).status_code == 403
    client.post(reverse("admin:scheduler_job_changelist"), {"action": "delete_selected", "_selected_action": [job.pk]})
    event = JobEvent.objects.filter(job=job).first()
    assert event is not None
    assert client.get(reverse("admin:scheduler_jobevent_delete", args=[event.pk])).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()
