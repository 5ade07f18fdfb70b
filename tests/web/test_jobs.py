"""Researcher pages: who sees what, the submit form's rules (the API's), the what-if,
templates, the job list, job detail and verbs, API tokens.

Personas (tests/conftest.py): alice and dora are members of lab, bob coordinates lab,
charlie is in other, admin is staff.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse

from people.models import ApiToken, JobTemplate, Qos, Quota
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from scheduler.tick import estimates
from tests.builders import submit

pytestmark = pytest.mark.django_db

FORM = {
    "name": "train",
    "account": "lab",
    "gpus_per_node": "1",
    "walltime_seconds": "1h",
    "command": "python train.py",
}


def page(client: Client, url: str, **params: str) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "url", ["/", "/jobs/", "/jobs/new/", "/jobs/1/", "/jobs/1/log/", "/tokens/", "/manage/accounts/"]
)
def test_every_page_sends_strangers_to_the_login_page(world, client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_login_page_logs_in_and_lands_on_the_dashboard(world, client):
    response = client.post("/login/", {"username": "alice", "password": "pw-alice"}, follow=True)
    assert response.redirect_chain[-1][0] == "/" and b"Dashboard" in response.content


# --- Dashboard ---------------------------------------------------------------------------------


def test_dashboard_shows_my_jobs_quota_use_free_gpus_and_next_starts(world, tick):
    Quota.objects.create(account=world.lab, max_gpus=32, max_gpus_per_model={"H100-80GB": 24})
    submit(world.alice, world.lab, name="big", gpus_per_node=8, nodes=2)
    tick()  # 16 H100s run
    waiting = submit(world.alice, world.lab, name="waits", gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    estimates.refresh_estimates()
    html = page(logged_in(world.alice), "/")
    assert re.search(r"<b>1</b> Running", html) and re.search(r"<b>1</b> Pending", html)
    assert "16 / 32" in html and "H100-80GB GPUs" in html and "16 / 24" in html  # quota use per model
    assert re.search(r"<td>H100-80GB</td><td><b>0</b></td><td>16</td>", html)  # free GPUs by model
    assert re.search(r"<td>L4</td><td><b>4</b></td>", html)
    waiting.refresh_from_db()
    assert waiting.estimated_start_at is not None and f"{waiting.id} waits" in html


def test_dashboard_of_a_coordinator_lists_the_accounts_jobs(world):
    submit(world.alice, world.lab, name="alices-job")
    assert "alices-job" in page(logged_in(world.bob), "/")
    assert "alices-job" not in page(logged_in(world.dora), "/")


# --- Submit ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("slug", ["ddp", "batch-inference", "interactive", "script"])
def test_each_template_prefills_the_form(world, slug):
    from web.jobs.presets import PRESETS_BY_SLUG

    html = page(logged_in(world.alice), "/jobs/new/", template=slug)
    assert f'value="{PRESETS_BY_SLUG[slug].fields["name"]}"' in html


def test_submit_creates_the_job_and_shows_it(world):
    client = logged_in(world.alice)
    response = client.post("/jobs/new/", {**FORM, "env": "A=1\nB=two", "dependencies": ""})
    job = Job.objects.get(name="train")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.id}/"
    assert (job.owner, job.account, job.walltime_seconds, job.env) == (
        world.alice,
        world.lab,
        3600,
        {"A": "1", "B": "two"},
    )
    assert job.events.filter(kind="submitted").exists()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"gpus_per_node": "abc"}, "gpus_per_node", "A valid integer is required."),
        ({"gpus_per_node": "64"}, "gpus_per_node", "No node has 64 GPUs"),
        ({"gpu_model": "Z900"}, "gpu_model", "Unknown GPU model"),
        ({"walltime_seconds": "forever"}, "walltime_seconds", "Give seconds"),
        ({"command": ""}, "command", "Give a command or a script."),
        ({"script": "echo hi"}, "script", "not both"),
        ({"env": "1BAD=x"}, "env", "Invalid variable names"),
        ({"env": "no equals sign"}, "env", "write KEY=value"),
        ({"min_compute_capability": "nine"}, "min_compute_capability", ""),
        ({"nice": "-5"}, "nice", "Only staff"),
        ({"dependencies": "afterok:999999"}, "dependencies", "No job you can see has id 999999"),
        ({"account": "other"}, "account", "Select a valid choice"),
        ({"node_labels": "rack"}, "node_labels", "write each node label as label=value"),
        ({"node_labels": "rack=r1, rack=r2"}, "node_labels", "given two values"),
        ({"node_labels": "rack=r9"}, "node_labels", "No node has the labels rack=r9."),
    ],
)
def test_bad_input_is_an_inline_error_on_its_field_never_a_500(world, change, field, message):
    response = logged_in(world.alice).post("/jobs/new/", {**FORM, **change})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("seconds", "shown"), [(14400, "4h"), (1800, "30m"), (5400, "1:30:00"), (90, "0:01:30"), (90061, "25:01:01")]
)
def test_walltimes_read_as_the_form_takes_them(seconds, shown):
    from web.words import format_walltime, parse_walltime

    assert format_walltime(seconds) == shown and parse_walltime(shown) == seconds


def test_pages_show_walltimes_as_the_form_takes_them_not_in_seconds(world):
    job = submit(world.alice, world.lab, walltime_seconds=14400)
    Quota.objects.create(user=world.alice, max_walltime_seconds=28800)
    assert "walltime 4h" in page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert "≤ 8h" in page(logged_in(world.admin), "/manage/users/")


def test_a_walltime_refusal_reads_in_hours_to_whoever_typed_hours(world):
    Quota.objects.create(account=world.lab, max_walltime_seconds=7200)
    errors = logged_in(world.alice).post("/jobs/new/", {**FORM, "walltime_seconds": "3h"}).context["form"].errors
    assert errors["walltime_seconds"] == ["3 h exceeds the Account lab quota maximum of 2 h."]


def test_the_form_refuses_what_the_api_refuses_with_the_same_message(world, client_for):
    body = {"name": "x", "account": "lab", "command": "true", "gpus_per_node": 64, "walltime_seconds": 60}
    api = client_for(world.alice).post("/api/v1/jobs/", body, format="json").json()
    form = logged_in(world.alice).post("/jobs/new/", {**FORM, "gpus_per_node": "64"}).context["form"]
    assert form.errors["gpus_per_node"] == api["gpus_per_node"]


def test_estimate_shows_the_what_if_and_submits_nothing(world, tick):
    submit(world.bob, world.lab, nodes=2, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2400)
    tick()  # every H100 is busy for 40 minutes
    response = logged_in(world.alice).post(
        "/jobs/new/", {**FORM, "nodes": "2", "gpus_per_node": "8", "gpu_model": "H100-80GB", "action": "estimate"}
    )
    html = response.content.decode()
    assert "Would start in about 40 min on 2 nodes x 8 H100-80GB GPUs." in html
    assert "Waiting for free GPUs, CPUs or memory" in html  # the blocker, in plain words
    assert Job.objects.count() == 1


def test_estimate_of_a_job_that_fits_now(world):
    html = logged_in(world.alice).post("/jobs/new/", {**FORM, "action": "estimate"}).content.decode()
    assert "Would start now on 1 node x 1 GPU." in html


def test_estimates_beyond_the_what_if_rate_are_a_form_error_saying_when_to_ask_again(world, settings):
    settings.SCHEDULER_WHATIF_RATE = "1/minute"
    alice = logged_in(world.alice)
    assert "Would start now" in alice.post("/jobs/new/", {**FORM, "action": "estimate"}).content.decode()
    again = alice.post("/jobs/new/", {**FORM, "action": "estimate"})
    assert again.status_code == 200
    [error] = again.context["form"].non_field_errors()
    assert error.startswith("Too many estimates in a short time; ask again in ")


def test_a_quota_refusal_is_shown_against_its_field(world):
    Quota.objects.create(account=world.lab, max_pending_jobs=1)
    submit(world.alice, world.lab)
    response = logged_in(world.alice).post("/jobs/new/", FORM)
    assert response.status_code == 200 and "account" in response.context["form"].errors


def test_saved_templates_are_personal(world):
    client = logged_in(world.alice)
    response = client.post(
        "/jobs/new/", {**FORM, "gpus_per_node": "2", "action": "save-template", "template_name": "mine"}
    )
    template = JobTemplate.objects.get(owner=world.alice, name="mine")
    assert response.status_code == 302 and template.fields["gpus_per_node"] == "2"
    assert 'value="2"' in page(client, "/jobs/new/", saved=str(template.id))
    assert "mine" not in page(logged_in(world.dora), "/jobs/new/", saved=str(template.id))
    assert logged_in(world.dora).post(f"/jobs/templates/{template.id}/delete/").status_code == 404
    client.post(f"/jobs/templates/{template.id}/delete/")
    assert not JobTemplate.objects.exists()


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"command": "python3 train.py\x00"}, "may not contain a NUL"),
        ({"template_name": "mi\x00ne"}, "control or text-direction character"),
    ],
    ids=["in a field", "in its name"],
)
def test_a_template_with_a_nul_is_refused_not_saved_without_it(world, changes, words):
    data = {**FORM, "action": "save-template", "template_name": "mine", **changes}
    response = logged_in(world.alice).post("/jobs/new/", data)
    assert response.status_code == 200 and words in response.context["template_error"]
    assert not JobTemplate.objects.exists()


def test_node_labels_typed_as_pairs_are_stored_as_the_api_stores_them(world):
    from scheduler.models import Node

    Node.objects.filter(name="h100-02").update(labels={"rack": "r2", "network": "infiniband"})
    logged_in(world.alice).post("/jobs/new/", {**FORM, "node_labels": "rack=r2,\n network = infiniband"})
    assert Job.objects.get(name="train").node_labels == {"rack": "r2", "network": "infiniband"}


def test_resubmit_as_copy_prefills_the_node_labels(world):
    job = submit(world.alice, world.lab, name="pinned", node_labels={"rack": "r2", "network": "infiniband"})
    html = page(logged_in(world.alice), "/jobs/new/", copy=str(job.id))
    assert 'name="node_labels" value="rack=r2, network=infiniband"' in html


def test_resubmit_as_copy_prefills_every_field_and_respects_visibility(world):
    job = submit(world.alice, world.lab, name="orig", gpus_per_node=2, env={"K": "v"}, walltime_seconds=5400)
    html = page(logged_in(world.alice), "/jobs/new/", copy=str(job.id))
    assert 'value="orig-copy"' in html and 'value="1:30:00"' in html and "K=v" in html
    assert logged_in(world.charlie).get("/jobs/new/", {"copy": job.id}).status_code == 404


# --- Job list ------------------------------------------------------------------------------------


def test_job_list_filters_sorts_and_pages(world, monkeypatch):
    from web.jobs import index

    monkeypatch.setattr(index, "PAGE_SIZE", 2)
    for name in ("a", "b", "c"):
        submit(world.alice, world.lab, name=name)
    submit(world.charlie, world.other, name="charlies")
    client = logged_in(world.alice)
    first = client.get("/jobs/").context
    assert [r["name"] for r in first["rows"]] == ["c", "b"] and first["has_next"]
    second = client.get("/jobs/", {"page": 2}).context
    assert [r["name"] for r in second["rows"]] == ["a"] and not second["has_next"]
    assert [r["name"] for r in client.get("/jobs/", {"sort": "id"}).context["rows"]] == ["a", "b"]
    assert [r["name"] for r in client.get("/jobs/", {"name": "b"}).context["rows"]] == ["b"]
    assert client.get("/jobs/", {"state": "RUNNING"}).context["rows"] == []


@pytest.mark.parametrize("params", [{"page": "abc"}, {"state": "BOGUS"}, {"sort": "password"}, {"page": "0"}])
def test_job_list_bad_filters_are_form_errors(world, params):
    response = logged_in(world.alice).get("/jobs/", params)
    assert response.status_code == 200 and response.context["form"].errors


def test_job_list_shows_only_visible_jobs(world):
    submit(world.alice, world.lab, name="alices")
    submit(world.charlie, world.other, name="charlies")
    assert "charlies" not in page(logged_in(world.alice), "/jobs/")
    assert "alices" not in page(logged_in(world.charlie), "/jobs/")
    assert "alices" in page(logged_in(world.bob), "/jobs/")


def test_bulk_cancel_cancels_only_what_the_user_may(world):
    mine = [submit(world.alice, world.lab) for _ in range(2)]
    theirs = submit(world.charlie, world.other)
    response = logged_in(world.alice).post(
        "/jobs/cancel/", {"job": [j.id for j in mine] + [theirs.id, "junk"], "next": "https://evil.example/"}
    )
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert set(Job.objects.filter(state="CANCELLED").values_list("id", flat=True)) == {j.id for j in mine}


# --- Job detail ----------------------------------------------------------------------------------


def test_job_detail_explains_a_waiting_job(world, tick):
    submit(world.bob, world.lab, nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    job = submit(world.alice, world.lab, name="waiter", gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    estimates.refresh_estimates()
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert "Waiting for free GPUs, CPUs or memory" in html and 'data-code="Resources"' in html
    assert 'id="estimate">Starts in about 60 min' in html
    assert 'id="priority"' in html and "Fair-share" in html
    assert "submitted by alice" in html  # the timeline
    assert 'id="job-gpu-charts"' in html  # the reserved chart slot


def test_job_detail_says_why_a_debug_job_waits_and_what_its_qos_allows(world, tick):
    debug = Qos.objects.create(name="debug", max_gpus_per_user=2, max_running_jobs_per_user=2)
    for gpus in (1, 2):
        submit(world.alice, world.lab, qos=debug, gpus_per_node=gpus, command="sleep 30")
    tick()  # one starts; the other would take her past 2 GPUs
    job = Job.objects.get(state="PENDING")
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert "QOS debug (2 GPUs per user, 2 running jobs per user)" in html
    assert 'data-code="QOSMaxGRESPerUser"' in html
    assert "Its owner holds all the GPUs its QOS allows a user" in html
    held, needs = (2, 1) if job.gpus_per_node == 1 else (1, 2)
    assert f"alice holds {held} of the 2 GPUs QOS debug allows a user; this job needs {needs}" in html
    for running in Job.objects.filter(state="RUNNING"):
        cancel_job(running, by="test")


def test_job_detail_shows_the_p50_and_p90_starts_beside_the_latest(world):
    job = submit(world.alice, world.lab, name="waiter")
    Job.objects.filter(pk=job.pk).update(
        estimated_start_at=datetime(2030, 1, 1, 16, 0, tzinfo=UTC),
        estimated_start_p50_at=datetime(2030, 1, 1, 12, 30, tzinfo=UTC),
        estimated_start_p90_at=datetime(2030, 1, 1, 14, 45, tzinfo=UTC),
    )
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert "at the latest 2030-01-01 16:00 UTC" in html
    assert 'id="calibrated-estimate">Likely start 2030-01-01 12:30 UTC (p50), and by 2030-01-01 14:45 UTC (p90)' in html
    assert logged_in(world.charlie).get(f"/jobs/{job.id}/").status_code == 404


def test_job_detail_without_a_p50_says_only_the_latest_start(world):
    job = submit(world.alice, world.lab)
    Job.objects.filter(pk=job.pk).update(estimated_start_at=datetime(2030, 1, 1, 16, 0, tzinfo=UTC))
    assert 'id="calibrated-estimate"' not in page(logged_in(world.alice), f"/jobs/{job.id}/")


@pytest.mark.parametrize(("nice", "shown"), [(0, "<td>0</td>"), (5, "<td>\u22125</td>"), (-5, "<td>+5</td>")])
def test_job_detail_shows_what_nice_does_to_the_priority_with_one_sign(world, tick, nice, shown):
    submit(world.bob, world.lab, nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    job = submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", nice=nice)
    tick()
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert re.search(r"<th>Nice</th>\s*" + re.escape(shown), html), html[html.find("<th>Nice") :][:80]


@pytest.mark.parametrize(
    ("paths", "output", "error"),
    [
        (
            {"output_path": "logs/%x-%j.out"},
            '/home/alice/run/logs/train-{id}.out</code> <span class="muted">(sbatch -o logs/%x-%j.out; stderr too)',
            None,
        ),
        (
            {"output_path": "o-%j.txt", "error_path": "e-%j.txt"},
            "/home/alice/run/o-{id}.txt",
            "/home/alice/run/e-{id}.txt",
        ),
        ({"output_path": "/dev/null", "error_path": "e.txt"}, "none: only the log below", "/home/alice/run/e.txt"),
    ],
    ids=["one file", "two files", "stderr alone"],
)
def test_job_detail_says_where_its_output_files_are_with_the_patterns_filled_in(world, paths, output, error):
    job = submit(world.alice, world.lab, name="train", workdir="/home/alice/run", **paths)

    html = page(logged_in(world.alice), f"/jobs/{job.id}/")

    assert re.search(r'<tr id="workdir"><th>Working directory</th><td><code>/home/alice/run<', html)
    row = html[html.find('id="output-file"') :]
    assert output.format(id=job.id) in row[: row.find("</tr>")], row[:300]
    if error is None:
        assert 'id="error-file"' not in html
    else:
        row = html[html.find('id="error-file"') :]
        assert error.format(id=job.id) in row[: row.find("</tr>")], row[:300]


def test_job_detail_of_a_job_without_output_files_shows_no_such_rows(world):
    html = page(logged_in(world.alice), f"/jobs/{submit(world.alice, world.lab).id}/")
    assert 'id="output-file"' not in html and 'id="error-file"' not in html and 'id="workdir"' not in html


def test_the_profile_says_who_set_the_cluster_identity_once(world):
    from people.models import ClusterIdentity

    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001)
    html = page(logged_in(world.alice), "/profile/")
    assert "set by staff." in html and "Set by staff" not in html


def test_job_detail_of_a_running_job_shows_placement_and_refreshes_its_log(world, tick):
    job = submit(world.alice, world.lab, gpus_per_node=2)
    tick()
    job.refresh_from_db()
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert job.external_id in html and "GPU 0, 1" in html and 'data-live="1"' in html
    log = logged_in(world.alice).get(f"/jobs/{job.id}/log/").json()
    assert log["state"] == job.state


def test_job_detail_of_a_waiting_job_refreshes_when_why_or_when_it_starts_changes(world, tick):
    submit(world.bob, world.lab, nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    job = submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    client = logged_in(world.alice)
    assert 'data-live="1"' in page(client, f"/jobs/{job.id}/")
    before = client.get(f"/jobs/{job.id}/log/").json()
    estimates.refresh_estimates()  # now it has an estimated start
    after = client.get(f"/jobs/{job.id}/log/").json()
    assert before["state"] == after["state"] == "PENDING" and before["watch"] != after["watch"]
    assert f'data-watch="{after["watch"]}"' in page(client, f"/jobs/{job.id}/")


def test_editing_a_job_says_what_changed_in_words_not_field_names(world):
    job = submit(world.alice, world.lab, name="before", walltime_seconds=7200)
    response = logged_in(world.alice).post(
        f"/jobs/{job.id}/edit/", {"name": "after", "walltime_seconds": "1h", "qos": "", "nice": "0"}, follow=True
    )
    assert f"Job {job.id}: changed name, walltime." in response.content.decode()
    assert job.events.get(kind="edited").message == "edited by alice: name, walltime"


def test_why_it_waits_names_its_figures_in_words():
    from web.words import evidence_items

    assert evidence_items({"best_node_free_gpus": 3, "max_gpus": 16, "memory_mib_per_node": 1024}) == [
        ("free GPUs on the best node", "3"),
        ("max GPUs", "16"),
        ("memory per node (MiB)", "1024"),
    ]


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 200), ("admin", 200), ("dora", 404), ("charlie", 404)]
)
def test_who_may_open_a_job(world, who, status):
    job = submit(world.alice, world.lab)
    client = logged_in(getattr(world, who))
    assert client.get(f"/jobs/{job.id}/").status_code == status
    assert client.get(f"/jobs/{job.id}/log/").status_code == status
    assert client.post(f"/jobs/{job.id}/hold/").status_code == (302 if status == 200 else 404)


def test_job_verbs_go_through_services_and_report_conflicts(world):
    job = submit(world.alice, world.lab)
    client = logged_in(world.alice)
    for verb, state in (("hold", "HELD"), ("release", "PENDING"), ("cancel", "CANCELLED"), ("requeue", "PENDING")):
        assert client.post(f"/jobs/{job.id}/{verb}/").status_code == 302
        job.refresh_from_db()
        assert job.state == state, verb
    html = client.post(f"/jobs/{job.id}/release/", follow=True).content.decode()
    assert "only HELD jobs can be released" in html
    assert client.get(f"/jobs/{job.id}/cancel/").status_code == 405
    assert client.post(f"/jobs/{job.id}/explode/").status_code == 404


def test_forms_need_a_csrf_token(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.alice)
    assert client.post("/jobs/new/", FORM).status_code == 403
    assert client.post("/tokens/", {"name": "x"}).status_code == 403


# --- API tokens ------------------------------------------------------------------------------------


def test_token_is_shown_once_listed_and_revoked(world, client_for):
    client = logged_in(world.alice)
    html = client.post("/tokens/", {"name": "laptop"}).content.decode()
    match = re.search(r'id="token-secret">(qm_[^<]+)<', html)
    assert match is not None
    secret = match[1]
    token = ApiToken.objects.get(user=world.alice)
    assert token.digest == ApiToken.hash(secret)
    listing = page(client, "/tokens/")
    assert secret not in listing and token.key_prefix in listing and "qm submit" in listing and "curl" in listing
    api = client_for(None)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/jobs/").status_code == 200
    assert logged_in(world.charlie).post(f"/tokens/{token.id}/revoke/").status_code == 404
    client.post(f"/tokens/{token.id}/revoke/")
    assert api.get("/api/v1/jobs/").status_code == 401


def test_a_blank_token_name_is_a_form_error(world):
    response = logged_in(world.alice).post("/tokens/", {"name": ""})
    assert response.status_code == 200 and "name" in response.context["form"].errors
    assert reverse("web:tokens") == "/tokens/"


def figure_of(html: str, name: str) -> dict:
    """The Plotly figure a page embeds for ``<div data-figure=name>`` (its json_script block)."""
    import json

    match = re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', html, re.S)
    assert match, f"no figure {name}"
    return json.loads(match.group(1))


def test_job_detail_charts_its_gpus_over_its_lifetime(world, tick):
    from datetime import timedelta

    from django.utils import timezone

    from monitoring.services import insert_samples
    from scheduler.models import Gpu

    job = submit(world.alice, world.lab, gpus_per_node=2)
    tick()
    job.refresh_from_db()
    ids = [Gpu.objects.get(node__name=a["node"], index=i).id for a in job.allocations for i in a["gpu_indices"]]
    since = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(started_at=since)
    insert_samples(
        [
            (g, since + timedelta(seconds=10 * k), {"utilization_pct": 90.0, "memory_used_mib": 100})
            for g in ids
            for k in range(20)
        ]
    )
    html = page(logged_in(world.bob), f"/jobs/{job.id}/")
    figure = figure_of(html, "figure-job-gpus")
    means = figure["data"][2]
    assert means["yaxis"] == "y" and len(means["x"]) > 0 and set(means["y"]) == {90.0}
    assert 'data-figure="figure-job-gpus"' in html and "plotly/plotly.min.js" in html and "js/charts.js" in html
    assert "<script>" not in html  # no inline script: the figure is a JSON data block


def test_job_detail_says_when_there_is_nothing_to_chart_yet(world):
    job = submit(world.alice, world.lab)
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert "The charts appear once the job starts." in html and "figure-job-gpus" not in html


def test_job_detail_of_a_job_on_an_unhealthy_gpu_says_so(world, tick):
    from django.utils import timezone

    from monitoring.services import record_health
    from scheduler.models import Gpu, Node

    job = submit(world.alice, world.lab)
    tick()
    job.refresh_from_db()
    (allocation,) = job.allocations
    node = Node.objects.get(name=allocation["node"])
    held = Gpu.objects.get(node=node, index=allocation["gpu_indices"][0])
    record_health(node, {held.id: (timezone.now(), {"temperature_c": 99.0})}, timezone.now())
    html = page(logged_in(world.alice), f"/jobs/{job.id}/")
    assert 'id="gpu-health"' in html and f"GPU {held.index} on {node.name}" in html


def test_plotly_js_is_served_from_the_plotly_package(world, client):
    from django.contrib.staticfiles import finders

    found = finders.find("plotly/plotly.min.js")
    assert found and found.endswith("plotly/package_data/plotly.min.js")


def test_a_script_typed_in_the_browser_runs_with_unix_line_ends(world):
    """Browsers send a textarea's lines ending in CRLF; a shell reads ``pipefail\\r`` as an
    unknown option, so the form hands the job Unix line ends."""
    client = logged_in(world.alice)
    body = {
        "name": "crlf",
        "account": "lab",
        "walltime_seconds": "10m",
        "script": "#!/bin/bash\r\nset -euo pipefail\r\necho hi\r\n",
        "env": "A=1\r\nB=2",
        "action": "submit",
    }
    assert client.post("/jobs/new/", body).status_code == 302
    job = Job.objects.get(name="crlf")
    assert job.script == "#!/bin/bash\nset -euo pipefail\necho hi"
    assert job.env == {"A": "1", "B": "2"}


def test_a_job_page_without_script_shows_the_tail_and_links_each_whole_log(world, tick):
    """Without JavaScript the page shows the tail of every rank's output together, and a
    download link for each log; the picker (JavaScript's) stays hidden."""
    from scheduler.clusters.poll import poll_backends
    from tests.scheduler.tick.waiting import wait_for

    job = submit(
        world.alice, world.lab, nodes=2, gpus_per_node=1, gpu_model="H100-80GB", command="echo out; echo err >&2"
    )
    tick()
    wait_for(lambda: poll_backends() or Job.objects.get(pk=job.pk).state == "COMPLETED", what="the job's end")
    client = logged_in(world.alice)

    html = page(client, f"/jobs/{job.id}/")

    assert re.search(r'<pre id="log"[^>]*>(.|\n)*out\n', html)
    assert '<p id="log-view" class="log-view" hidden' in html
    links = re.findall(r'<a href="([^"]+)" download>([^<]+)</a>', html)
    assert [label for _, label in links] == [
        "all ranks combined",
        "rank 0 stdout",
        "rank 0 stderr",
        "rank 1 stdout",
        "rank 1 stderr",
    ]
    url = dict((label, href) for href, label in links)["rank 1 stderr"].replace("&amp;", "&")
    download = client.get(url)  # the page's session may follow it
    assert isinstance(download, StreamingHttpResponse)  # streamed, never whole in memory
    assert b"".join(download.streaming_content) == b"err\n"
    assert logged_in(world.charlie).get(url).status_code == 404
