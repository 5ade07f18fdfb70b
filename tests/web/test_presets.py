"""The built-in templates run what their titles say, with the example programs the project
ships, on the local cluster; the page says what a template needs before submit; admins
save templates for everyone from the submit form itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from people.models import AuditEntry, JobTemplate, SiteTemplate
from scheduler.clusters.logs import read_job_log
from scheduler.models import Job
from tests.builders import run_until_ended
from web.jobs.presets import EXAMPLES, PRESETS, PRESETS_BY_SLUG


def logged_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def form_post(preset_slug: str, **changes: str) -> dict[str, str]:
    """What the submit page posts after a click on a template (and any edits)."""
    return {**PRESETS_BY_SLUG[preset_slug].fields, "account": "lab", "template": preset_slug, **changes}


def submitted(client: Client, body: dict[str, str]) -> Job:
    response = client.post("/jobs/new/", {**body, "action": "submit"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    return Job.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))


# --- What each example program does ----------------------------------------------------------


def test_every_template_file_is_an_example_the_project_ships():
    for preset in PRESETS:
        for name in preset.files:
            assert (EXAMPLES / name).is_file(), f"{preset.slug}: examples/{name} is missing"


def contract_env(rank: int, nodes: int, port: int) -> dict[str, str]:
    return dict(
        os.environ, QM_NODE_RANK=str(rank), QM_NNODES=str(nodes), QM_MASTER_ADDR="127.0.0.1", QM_MASTER_PORT=str(port)
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_ddp_example_ranks_meet_average_gradients_and_agree(tmp_path: Path):
    """Three ranks meet at rank 0 through the job-environment contract; each sees only its
    shard, yet together they recover the line the data was drawn from, with equal weights."""
    port = free_port()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(EXAMPLES / "ddp_train.py"), "--steps", "80"],
            cwd=tmp_path,
            env=contract_env(rank, 3, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (2, 1, 0)  # the workers first: they wait for rank 0 to listen
    ]
    outputs = [rank.communicate(timeout=60)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0, 0], outputs
    checkpoint = json.loads((tmp_path / "checkpoint.json").read_text())
    assert checkpoint["ranks"] == 3
    assert checkpoint["slope"] == pytest.approx(3.0, abs=0.05)
    assert checkpoint["bias"] == pytest.approx(1.0, abs=0.05)
    last_steps = {line.split(" step ")[1] for out in outputs for line in out.splitlines() if " step 80:" in line}
    assert len(last_steps) == 1, f"ranks disagree at the last step: {last_steps}"


def test_the_batch_inference_example_writes_one_prediction_per_input_across_array_tasks(tmp_path: Path):
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(["great", "broken"] * 5)))
    for task in range(3):
        env = dict(os.environ, QM_ARRAY_TASK_ID=str(task), QM_ARRAY_TASK_COUNT="3")
        subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / "batch_infer.py"),
                "--input",
                str(inputs),
                "--output",
                "out",
                "--batch-size",
                "2",
            ],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
        )
    predictions = [json.loads(line) for f in sorted((tmp_path / "out").glob("*.jsonl")) for line in f.open()]
    assert sorted(p["id"] for p in predictions) == list(range(10))
    assert {p["id"]: p["label"] for p in predictions}[0] == "positive"
    assert {p["id"]: p["label"] for p in predictions}[1] == "negative"


def test_the_batch_inference_example_fails_on_an_unreadable_input(tmp_path: Path):
    (tmp_path / "in.jsonl").write_text('{"text": "fine"}\nnot json\n')
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "batch_infer.py"), "--input", "in.jsonl", "--output", "out"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert "in.jsonl:2: not JSON" in run.stderr


# --- Through the form, on the local cluster --------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "says"),
    [
        ("ddp", "rank 0: wrote checkpoint.json"),
        ("batch-inference", "200 inputs -> predictions/predictions-0.jsonl"),
        ("script", "working directory:"),
    ],
)
def test_a_template_submitted_as_it_comes_completes_and_does_its_work(world, tick, slug, says):
    job = run_until_ended(submitted(logged_in(world.alice), form_post(slug)), tick)
    log = read_job_log(job)
    assert job.state == "COMPLETED", log
    assert says in log


def test_a_template_attaches_its_example_files_and_an_upload_of_the_same_name_replaces_one(world):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = logged_in(world.alice)
    job = submitted(client, form_post("batch-inference"))
    assert job.file_set is not None
    files = job.file_set.files
    assert files["batch_infer.py"] == (EXAMPLES / "batch_infer.py").read_text()
    assert files["reviews.jsonl"].count("\n") == 200

    mine = SimpleUploadedFile("reviews.jsonl", b'{"id": 1, "text": "great"}\n')
    job = submitted(client, {**form_post("batch-inference"), "job_files": mine})  # type: ignore[dict-item]
    assert job.file_set is not None
    assert job.file_set.files["reviews.jsonl"] == '{"id": 1, "text": "great"}\n'


def test_an_unknown_template_is_refused_not_submitted_without_its_files(world):
    response = logged_in(world.alice).post(
        "/jobs/new/", {**form_post("script"), "template": "nope", "action": "submit"}
    )
    assert response.status_code == 200
    assert "nope is not one of the available choices" in response.content.decode()
    assert not Job.objects.exists()


def test_the_page_says_what_a_template_runs_that_the_local_nodes_lack(world, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    html = logged_in(world.alice).get("/jobs/new/", {"template": "interactive"}).content.decode()
    assert 'id="template-missing"' in html
    assert "do not find <code>jupyter</code> on their PATH" in html

    jupyter = tmp_path / "jupyter"
    jupyter.write_text("#!/bin/sh\n")
    jupyter.chmod(0o755)
    html = logged_in(world.alice).get("/jobs/new/", {"template": "interactive"}).content.decode()
    assert 'id="template-missing"' not in html
    assert "which the cluster's nodes must have" in html


# --- Site templates -------------------------------------------------------------------------


def save_for_everyone(client: Client, template_name: str, **fields: str):  # type: ignore[no-untyped-def]
    body = {
        **form_post("script"),
        **fields,
        "template_name": template_name,
        "template_description": "The lab's eval run",
    }
    return client.post("/jobs/new/", {**body, "action": "save-site-template"})


def test_an_admin_saves_a_template_for_everyone_from_the_submit_form(world):
    response = save_for_everyone(logged_in(world.admin), "lab-eval", name="eval", gpus_per_node="2")
    assert response.status_code == 302
    site = SiteTemplate.objects.get(name="lab-eval")
    assert site.fields["gpus_per_node"] == "2" and site.description == "The lab's eval run"

    html = logged_in(world.charlie).get("/jobs/new/").content.decode()
    assert 'data-site-template="lab-eval"' in html
    prefilled = logged_in(world.charlie).get("/jobs/new/", {"site": site.pk}).content.decode()
    assert 'value="eval"' in prefilled

    save_for_everyone(logged_in(world.admin), "lab-eval", name="eval2")
    assert SiteTemplate.objects.get(name="lab-eval").fields["name"] == "eval2"
    assert list(
        AuditEntry.objects.filter(target_type="site template").order_by("id").values_list("action", flat=True)
    ) == [
        "create",
        "update",
    ]


def test_a_researcher_cannot_save_for_everyone_and_gets_told(world):
    response = save_for_everyone(logged_in(world.alice), "mine-for-all")
    assert response.status_code == 200
    assert "Only admins save templates for everyone." in response.content.decode()
    assert not SiteTemplate.objects.exists() and not JobTemplate.objects.exists()


def test_the_site_templates_page_lists_them_and_deletes_one_audited(world):
    save_for_everyone(logged_in(world.admin), "lab-eval")
    site = SiteTemplate.objects.get()
    admin = logged_in(world.admin)
    assert "lab-eval" in admin.get("/manage/templates/").content.decode()
    assert logged_in(world.alice).get("/manage/templates/").status_code == 403
    assert logged_in(world.alice).post(f"/manage/templates/{site.pk}/delete/").status_code == 403
    assert admin.post(f"/manage/templates/{site.pk}/delete/").status_code == 302
    assert not SiteTemplate.objects.exists()
    assert AuditEntry.objects.filter(target_type="site template", action="delete").exists()


def test_a_template_field_too_long_to_keep_is_refused_by_name(world):
    response = logged_in(world.alice).post(
        "/jobs/new/",
        {**form_post("script"), "script": "x" * 100_001, "template_name": "big", "action": "save-template"},
    )
    assert "Script is too long for a template (100,001 characters, at most 100,000)." in response.content.decode()
    assert not JobTemplate.objects.exists()
