"""The Files page: alice browses her folders, downloads, uploads (with the CSRF check a
browser makes), makes and deletes folders (a folder that is not empty after a page that
asks); her job's page opens its working directory here; nobody else's files appear."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import StreamingHttpResponse
from django.test import Client

from tests.builders import submit
from tests.scheduler.files.homes import ALICE_UID, Homes, homes_the_portal_reaches, needs_bob

pytestmark = pytest.mark.django_db


@pytest.fixture
def homes(passable_tmp: Path, settings: Any, world: Any) -> Homes:
    return homes_the_portal_reaches(passable_tmp, settings, world)


def logged_in(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def csrf_token(client: Client, url: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(url).content.decode())
    assert found, "no CSRF token on the page"
    return found.group(1)


def test_the_page_starts_at_alices_folders_and_the_navigation_leads_there(world, homes):
    page = logged_in(world.alice).get("/files/").content.decode()
    assert str(homes.alice) in page and 'href="/files/"' in page  # the navigation's link


def test_alice_browses_a_folder_with_breadcrumbs_and_actions(world, homes):
    homes.put(homes.alice / "run" / "out.txt", "ok")
    homes.folder(homes.alice / "run" / "ckpt")
    response = logged_in(world.alice).get("/files/", {"path": str(homes.alice / "run")})
    assert response.status_code == 200
    page = response.content.decode()
    crumbs = page[page.index('id="breadcrumbs"') : page.index("</nav>", page.index('id="breadcrumbs"'))]
    assert "Your folders" in crumbs and str(homes.alice) in crumbs and "<strong>run</strong>" in crumbs
    table = page[page.index('id="files"') :]
    assert table.index("ckpt") < table.index("out.txt")  # folders first
    assert "/files/download/?path=" in table and 'data-confirm="Delete out.txt?"' in table
    assert 'id="upload-form"' in page and 'id="mkdir-form"' in page


def test_alice_downloads_from_the_page(world, homes):
    homes.put(homes.alice / "out.txt", "result\n")
    response = logged_in(world.alice).get("/files/download/", {"path": str(homes.alice / "out.txt")})
    assert response.status_code == 200 and isinstance(response, StreamingHttpResponse)  # never whole in memory
    assert b"".join(response.streaming_content) == b"result\n"


def test_alice_uploads_through_the_form_with_its_csrf_token(world, homes):
    client = logged_in(world.alice, csrf=True)
    url = f"/files/?path={homes.alice}"
    form = {"csrfmiddlewaretoken": csrf_token(client, url), "file": SimpleUploadedFile("notes.md", b"# notes")}
    response = client.post(f"/files/upload/?path={homes.alice}", form, follow=True)
    assert response.status_code == 200 and "Uploaded notes.md." in response.content.decode()
    assert (homes.alice / "notes.md").read_bytes() == b"# notes"
    assert os.stat(homes.alice / "notes.md").st_uid == ALICE_UID


def test_an_upload_without_the_csrf_token_leaves_nothing_behind(world, homes):
    """The body is read (and streamed to the agent) before the CSRF check can run: the
    staged file is removed when the check refuses the request."""
    client = logged_in(world.alice, csrf=True)
    response = client.post(f"/files/upload/?path={homes.alice}", {"file": SimpleUploadedFile("x.sh", b"evil")})
    assert response.status_code == 403
    assert os.listdir(homes.alice) == []


def test_alice_makes_a_folder_and_deletes_a_full_one_after_confirming(world, homes):
    client = logged_in(world.alice)
    made = client.post("/files/mkdir/", {"path": str(homes.alice), "name": "data"}, follow=True)
    assert "Made the folder data." in made.content.decode() and (homes.alice / "data").is_dir()
    homes.put(homes.alice / "data" / "x.csv", "1,2")
    asked = client.post("/files/delete/", {"path": str(homes.alice / "data")})
    assert asked.status_code == 409 and "is not empty" in asked.content.decode()
    assert 'name="recursive" value="1"' in asked.content.decode() and (homes.alice / "data").exists()
    done = client.post("/files/delete/", {"path": str(homes.alice / "data"), "recursive": "1"}, follow=True)
    assert "Deleted the folder data." in done.content.decode() and not (homes.alice / "data").exists()


def test_a_refusal_is_shown_on_the_page_with_its_status(world, homes):
    client = logged_in(world.alice)
    response = client.get("/files/", {"path": str(homes.alice / "nowhere")})
    assert response.status_code == 404 and "does not exist" in response.content.decode()
    outside = client.get("/files/", {"path": "/etc"})
    assert outside.status_code == 403 and "lies outside your folders" in outside.content.decode()
    nobody = logged_in(world.charlie).get("/files/")
    assert nobody.status_code == 403 and "no cluster identity" in nobody.content.decode()


def test_bob_cannot_browse_alices_folder_from_the_page(world, homes):
    needs_bob()
    homes.put(homes.alice / "secret.txt", "alice's secret")
    response = logged_in(world.bob).get("/files/", {"path": str(homes.alice)})
    assert response.status_code == 403 and "secret.txt" not in response.content.decode()


def test_a_jobs_page_opens_its_working_directory_in_files_for_its_owner(world, homes):
    workdir = homes.folder(homes.alice / "run")
    job = submit(world.alice, world.lab, workdir=str(workdir))
    link = f'href="/files/?path={workdir}" id="open-in-files"'
    assert link in logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    # bob coordinates lab and sees the job, but her files are hers
    assert "Open in Files" not in logged_in(world.bob).get(f"/jobs/{job.id}/").content.decode()
