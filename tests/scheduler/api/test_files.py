"""``/api/v1/files/``: alice lists, downloads, uploads and deletes in her own folders, as
her cluster user; bob never reaches hers, whichever way he names them."""

from __future__ import annotations

import io
import os
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.scheduler.files.homes import ALICE_UID, AS_ROOT, Homes, homes_the_portal_reaches, needs_bob

pytestmark = pytest.mark.django_db


@pytest.fixture
def homes(passable_tmp: Path, settings: Any, world: Any) -> Homes:
    return homes_the_portal_reaches(passable_tmp, settings, world)


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


# -- alice in her own folders ---------------------------------------------------------------


def test_alice_lists_her_folder_with_what_each_entry_is(world, client_for, homes):
    homes.put(homes.alice / "train.py", "print(1)\n")
    homes.folder(homes.alice / "runs")
    homes.link(homes.alice / "latest", homes.alice / "runs")
    response = client_for(world.alice).get("/api/v1/files/", {"path": str(homes.alice)})
    assert response.status_code == 200, response.json()
    listing = response.json()
    assert listing["path"] == str(homes.alice) and listing["parent"] is None
    entries = {e["name"]: e for e in listing["entries"]}
    assert listing["entries"][0]["name"] == "runs"  # folders first
    assert entries["train.py"]["type"] == "file" and entries["train.py"]["size"] == 9
    assert entries["train.py"]["permissions"] == "-rw-r--r--" and entries["train.py"]["mtime"].startswith("20")
    assert entries["latest"]["type"] == "link" and entries["runs"]["type"] == "folder"


def test_alice_sees_her_roots(world, client_for, homes):
    answer = client_for(world.alice).get("/api/v1/files/roots/").json()
    assert answer == {"user": "alice", "roots": [str(homes.alice)]}


def test_alice_downloads_a_file(world, client_for, homes):
    homes.put(homes.alice / "out.txt", "loss 0.1\n")
    response = client_for(world.alice).get("/api/v1/files/download/", {"path": str(homes.alice / "out.txt")})
    assert response.status_code == 200
    assert body(response) == b"loss 0.1\n"
    assert response["Content-Length"] == "9" and 'filename="out.txt"' in response["Content-Disposition"]


def test_alice_downloads_a_folder_as_a_tar_archive(world, client_for, homes):
    homes.put(homes.alice / "run" / "ckpt" / "model.pt", b"\x00weights" * 1000)
    homes.put(homes.alice / "run" / "log.txt", "done\n")
    homes.link(homes.alice / "run" / "alias", Path("/etc/passwd"))
    os.mkfifo(homes.alice / "run" / "pipe")
    response = client_for(world.alice).get("/api/v1/files/download/", {"path": str(homes.alice / "run")})
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body(response))) as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert set(members) == {"run/alias", "run/ckpt", "run/ckpt/model.pt", "run/log.txt"}  # no FIFO
        assert archive.extractfile("run/ckpt/model.pt").read() == b"\x00weights" * 1000  # type: ignore[union-attr]
    assert members["run/alias"].issym() and members["run/alias"].linkname == "/etc/passwd"  # the link, not its target


def test_a_folder_over_the_archive_limit_is_refused_before_anything_is_sent(world, client_for, homes, settings):
    settings.FILES_ARCHIVE_MAX_ENTRIES = 2
    for name in "abc":
        homes.put(homes.alice / "many" / name, name)
    response = client_for(world.alice).get("/api/v1/files/download/", {"path": str(homes.alice / "many")})
    assert response.status_code == 413
    assert "more than 2 entries" in response.json()["path"][0]


def test_alice_uploads_files_which_are_hers(world, client_for, homes):
    files = [SimpleUploadedFile("a.txt", b"alpha"), SimpleUploadedFile("b.bin", b"\x00" * 70000)]
    response = client_for(world.alice).post(f"/api/v1/files/upload/?path={homes.alice}", {"file": files})
    assert response.status_code == 201, response.content
    assert response.json()["uploaded"] == [{"name": "a.txt", "size": 5}, {"name": "b.bin", "size": 70000}]
    assert (homes.alice / "a.txt").read_bytes() == b"alpha"
    assert os.stat(homes.alice / "b.bin").st_uid == ALICE_UID  # written as her cluster user
    assert not [p for p in os.listdir(homes.alice) if p.startswith(".qm-upload")]


def test_an_upload_replaces_a_file_only_when_asked(world, client_for, homes):
    homes.put(homes.alice / "a.txt", "old")
    client = client_for(world.alice)
    kept = client.post(f"/api/v1/files/upload/?path={homes.alice}", {"file": SimpleUploadedFile("a.txt", b"new")})
    assert kept.status_code == 409 and "already exists" in kept.json()["detail"]
    assert (homes.alice / "a.txt").read_text() == "old"
    replaced = client.post(
        f"/api/v1/files/upload/?path={homes.alice}&replace=true", {"file": SimpleUploadedFile("a.txt", b"new")}
    )
    assert replaced.status_code == 201 and (homes.alice / "a.txt").read_text() == "new"
    assert not [p for p in os.listdir(homes.alice) if p.startswith(".qm-upload")]


def test_an_upload_over_the_limit_is_refused_naming_the_file(world, client_for, homes, settings):
    settings.FILES_MAX_UPLOAD_BYTES = 1000
    response = client_for(world.alice).post(
        f"/api/v1/files/upload/?path={homes.alice}", {"file": SimpleUploadedFile("big.bin", b"x" * 200_000)}
    )
    assert response.status_code == 413 and "file" in response.json()
    assert os.listdir(homes.alice) == []


def test_an_upload_without_a_file_names_the_field(world, client_for, homes):
    response = client_for(world.alice).post(f"/api/v1/files/upload/?path={homes.alice}", {"note": "x"})
    assert response.status_code == 400 and "file" in response.json()


def test_alice_makes_and_deletes_folders_and_files(world, client_for, homes):
    client = client_for(world.alice)
    made = client.post("/api/v1/files/mkdir/", {"path": str(homes.alice), "name": "data"}, format="json")
    assert made.status_code == 201 and made.json() == {"path": str(homes.alice / "data")}
    assert (homes.alice / "data").is_dir() and os.stat(homes.alice / "data").st_uid == ALICE_UID
    again = client.post("/api/v1/files/mkdir/", {"path": str(homes.alice), "name": "data"}, format="json")
    assert again.status_code == 409
    homes.put(homes.alice / "data" / "x.txt", "x")
    refused = client.delete(f"/api/v1/files/?path={homes.alice / 'data'}")
    assert refused.status_code == 409 and "not empty" in refused.json()["detail"]
    assert client.delete(f"/api/v1/files/?path={homes.alice / 'data' / 'x.txt'}").status_code == 204
    homes.put(homes.alice / "data" / "y.txt", "y")
    assert client.delete(f"/api/v1/files/?path={homes.alice / 'data'}&recursive=true").status_code == 204
    assert not (homes.alice / "data").exists()


def test_a_root_itself_is_never_deleted(world, client_for, homes):
    response = client_for(world.alice).delete(f"/api/v1/files/?path={homes.alice}&recursive=true")
    assert response.status_code == 400 and "top folders" in response.json()["path"][0]
    assert homes.alice.is_dir()


def test_a_new_folders_name_must_be_plain(world, client_for, homes):
    for name in ("../bob", "a/b", ".."):
        response = client_for(world.alice).post(
            "/api/v1/files/mkdir/", {"path": str(homes.alice), "name": name}, format="json"
        )
        assert response.status_code == 400 and "name" in response.json(), name


# -- what is never served ----------------------------------------------------------------------


def test_paths_are_checked_naming_the_field(world, client_for, homes):
    client = client_for(world.alice)
    for path, words in (("", "blank"), ("home/alice", "absolute"), (f"{homes.alice}/../bob", "'..'")):
        response = client.get("/api/v1/files/", {"path": path})
        assert response.status_code == 400 and words in response.json()["path"][0], (path, response.json())


def test_a_missing_path_is_404(world, client_for, homes):
    response = client_for(world.alice).get("/api/v1/files/", {"path": str(homes.alice / "nowhere")})
    assert response.status_code == 404 and "does not exist" in response.json()["detail"]


def test_a_fifo_and_a_device_are_refused(world, client_for, homes):
    os.mkfifo(homes.alice / "pipe")
    homes.own(homes.alice / "pipe")
    client = client_for(world.alice)
    response = client.get("/api/v1/files/download/", {"path": str(homes.alice / "pipe")})
    assert response.status_code == 400 and "is a fifo" in response.json()["path"][0]
    if AS_ROOT:  # only root makes device nodes
        os.mknod(homes.alice / "null", 0o666 | 0o020000, os.makedev(1, 3))
        response = client.get("/api/v1/files/download/", {"path": str(homes.alice / "null")})
        assert response.status_code == 400 and "is a device" in response.json()["path"][0]
    linked = homes.link(homes.alice / "zero", Path("/dev/zero"))
    response = client.get("/api/v1/files/download/", {"path": str(linked)})
    assert response.status_code == 403 and "really /dev/zero" in response.json()["detail"]


def test_a_file_alices_user_cannot_read_is_not_read_for_her(world, client_for, homes):
    if not AS_ROOT:
        pytest.skip("only root can leave a file in alice's folder that her uid cannot read")
    homes.put(homes.alice / "roots-only.txt", "root's", uid=0, mode=0o600)
    response = client_for(world.alice).get("/api/v1/files/download/", {"path": str(homes.alice / "roots-only.txt")})
    assert response.status_code == 403 and "Permission denied" in response.json()["detail"]


def test_a_user_without_a_cluster_identity_is_told_so(world, client_for, homes):
    response = client_for(world.charlie).get("/api/v1/files/", {"path": str(homes.alice)})
    assert response.status_code == 403 and "no cluster identity" in response.json()["detail"]


def test_bob_cannot_name_alices_files(world, client_for, homes):
    needs_bob()
    homes.put(homes.alice / "secret.txt", "alice's secret")
    bob = client_for(world.bob)
    for path in (str(homes.alice / "secret.txt"), f"{homes.bob}/../alice/secret.txt"):
        response = bob.get("/api/v1/files/download/", {"path": path})
        assert response.status_code in (400, 403), path
        assert b"alice's secret" not in response.content
    assert bob.get("/api/v1/files/", {"path": str(homes.alice)}).status_code == 403
    assert bob.delete(f"/api/v1/files/?path={homes.alice / 'secret.txt'}").status_code == 403
    upload = bob.post(f"/api/v1/files/upload/?path={homes.alice}", {"file": SimpleUploadedFile("x", b"x")})
    assert upload.status_code == 403 and sorted(os.listdir(homes.alice)) == ["secret.txt"]


def test_a_link_bob_plants_in_his_folder_leads_nowhere(world, client_for, homes):
    """Even where the modes would let bob's uid read it (a world-readable folder of
    alice's), a link in his own folder does not take the portal there."""
    needs_bob()
    homes.folder(homes.alice, mode=0o755)
    homes.put(homes.alice / "notes.txt", "alice's notes")
    homes.link(homes.bob / "into-alice", homes.alice)
    homes.link(homes.bob / "notes", homes.alice / "notes.txt")
    bob = client_for(world.bob)
    listing = bob.get("/api/v1/files/", {"path": str(homes.bob / "into-alice")})
    assert listing.status_code == 403 and "lies outside" in listing.json()["detail"]
    download = bob.get("/api/v1/files/download/", {"path": str(homes.bob / "notes")})
    assert download.status_code == 403 and b"alice's notes" not in download.content
    archive = bob.get("/api/v1/files/download/", {"path": str(homes.bob)})
    assert b"alice's notes" not in body(archive)  # the link is archived as a link
    deleted = bob.delete(f"/api/v1/files/?path={homes.bob / 'into-alice'}")
    assert deleted.status_code == 204 and (homes.alice / "notes.txt").exists()  # the link went, not her files


def test_a_link_swapped_between_check_and_use_never_serves_alices_file(world, client_for, homes):
    """A thread of bob's flips ``~bob/f`` between his own file and alice's (world-readable)
    as fast as it can while he downloads it: each answer is his file or a refusal."""
    needs_bob()
    homes.folder(homes.alice, mode=0o755)
    homes.put(homes.alice / "notes.txt", "alice's notes")
    mine = homes.put(homes.bob / "mine.txt", "bob's own")
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            for target in (mine, homes.alice / "notes.txt"):
                homes.link(homes.bob / "f.new", target)
                os.replace(homes.bob / "f.new", homes.bob / "f")

    homes.link(homes.bob / "f", mine)
    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    bob = client_for(world.bob)
    try:
        answers = [bob.get("/api/v1/files/download/", {"path": str(homes.bob / "f")}) for _ in range(12)]
        contents = [body(a) if a.status_code == 200 else a.content for a in answers]
    finally:
        stop.set()
        flipper.join()
    for answer, content in zip(answers, contents, strict=True):
        assert b"alice's notes" not in content
        assert answer.status_code in (200, 403, 404), content
        if answer.status_code == 200:
            assert content == b"bob's own"


def test_staff_act_as_themselves_too(world, client_for, homes):
    """The admin has no cluster identity here: staff get no way into anyone's files."""
    response = client_for(world.admin).get("/api/v1/files/", {"path": str(homes.alice)})
    assert response.status_code == 403


def test_a_large_file_streams_with_flat_memory(world, client_for, homes):
    """64 MiB through the view: what Python holds at its peak stays a few chunks."""
    import tracemalloc

    with open(homes.alice / "big.bin", "wb") as big:
        big.truncate(64 << 20)
    homes.own(homes.alice / "big.bin")
    response = client_for(world.alice).get("/api/v1/files/download/", {"path": str(homes.alice / "big.bin")})
    tracemalloc.start()
    try:
        total = sum(len(chunk) for chunk in response.streaming_content)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 64 << 20
    assert peak < 8 << 20, peak


def test_a_session_upload_without_its_csrf_token_leaves_nothing(world, homes):
    """DRF reads the body to check a session's CSRF token: the file streamed meanwhile is
    removed when the check refuses the request."""
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.alice)
    response = client.post(f"/api/v1/files/upload/?path={homes.alice}", {"file": SimpleUploadedFile("x.sh", b"evil")})
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert os.listdir(homes.alice) == []


def test_a_read_only_token_lists_but_never_uploads(world, homes):
    from rest_framework.test import APIClient

    from people.services import create_api_token

    _, secret = create_api_token(world.alice, "ro", read_only=True)
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/files/", {"path": str(homes.alice)}).status_code == 200
    upload = client.post(f"/api/v1/files/upload/?path={homes.alice}", {"file": SimpleUploadedFile("x", b"x")})
    assert upload.status_code == 403 and os.listdir(homes.alice) == []
