"""The researcher's workspace end to end in a real Chromium, on a sandboxed local cluster.

alice opens her job's directory in Files from the job's page, downloads what the job
wrote and uploads a file, which lands as hers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.builders import local_node_group, make_local_cluster, run_until_ended, submit
from tests.scheduler.files.homes import ALICE_UID, AS_ROOT, give_identities, make_homes, reach_homes

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]


@pytest.fixture
def lab_cluster(world: Any) -> Any:
    """The one cluster: two L4s in bubblewrap."""
    world.cluster.enabled = False
    world.cluster.save()
    return make_local_cluster("workspace", [local_node_group("box-01", gpus=2, model="L4")], sandbox="bwrap")


@pytest.fixture
def homes(passable_tmp: Path, settings: Any, world: Any) -> Any:
    homes = make_homes(passable_tmp)
    reach_homes(settings, homes)
    give_identities(world)
    return homes


def test_alice_browses_her_jobs_directory_downloads_its_output_and_uploads_a_file(
    transactional_db, world, lab_cluster, homes, login, shot
):
    run = homes.folder(homes.alice / "run-1")
    job = submit(world.alice, world.lab, command="echo 'loss=0.25' > metrics.txt", workdir=str(run))
    run_until_ended(job, timeout=120)
    assert job.state == "COMPLETED", job.state_reason

    page = login("alice")
    page.goto(f"/jobs/{job.pk}/")
    page.click("#open-in-files")
    expect(page.locator("#files")).to_contain_text("metrics.txt")
    with page.expect_download() as downloading:
        page.locator("#files tr", has_text="metrics.txt").get_by_role("link", name="Download").click()
    assert Path(downloading.value.path()).read_bytes() == b"loss=0.25\n"

    page.get_by_label("Files").set_input_files({"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# next"})
    page.click("#upload-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Uploaded notes.md.")
    expect(page.locator("#files")).to_contain_text("notes.md")
    shot(page, "workspace-files")

    landed = run / "notes.md"
    assert landed.read_bytes() == b"# next"
    if AS_ROOT:
        assert (landed.stat().st_uid, (run / "metrics.txt").stat().st_uid) == (ALICE_UID, ALICE_UID)
    else:
        assert landed.stat().st_uid == os.geteuid()
