"""Admin pages: staff only; accounts, quotas and members edited in forms with the API's
rules and an audit entry per change; nodes drained and resumed with a reason; GPU-hours
by account and its CSV."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from people.models import Account, AuditEntry, Membership, Quota
from scheduler.choices import JobState
from scheduler.models import Job, Node, Simulation, StartBacktest
from tests.builders import end, gpu_process, report_processes, start, submit

pytestmark = pytest.mark.django_db

STAFF_URLS = [
    "/manage/accounts/",
    "/manage/accounts/new/",
    "/manage/audit/",
    "/manage/nodes/",
    "/manage/cluster/",
    "/manage/cluster/gpu-hours.csv",
    "/manage/users/",
]


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", STAFF_URLS)
def test_researchers_get_403_and_staff_get_the_page(world, url):
    assert logged_in(world.alice).get(url).status_code == 403
    assert logged_in(world.bob).get(url).status_code == 403  # a coordinator is not an admin
    assert logged_in(world.admin).get(url).status_code == 200


def test_researchers_cannot_post_to_admin_forms(world):
    lab = world.lab
    client = logged_in(world.alice)
    assert client.post(f"/manage/accounts/{lab.id}/", {"form": "quota", "max_gpus": "999"}).status_code == 403
    node = Node.objects.order_by("id")[0]
    assert client.post(f"/manage/nodes/{node.id}/drain/", {"reason": "mine now"}).status_code == 403
    assert not Quota.objects.exists() and Node.objects.get(pk=node.pk).state == "up"


def test_accounts_page_shows_the_tree_members_quotas_and_sshare(world):
    child = Account.objects.create(name="vision", parent=world.lab, shares=3)
    Quota.objects.create(account=child, max_gpus=8, guaranteed_gpus=4)
    html = logged_in(world.admin).get("/manage/accounts/").content.decode()
    assert "vision" in html and "guaranteed 4" in html and "bob (coordinator)" in html
    assert 'id="sshare"' in html and 'id="fairshare-chart"' in html


def test_creating_and_editing_an_account_is_audited(world):
    client = logged_in(world.admin)
    response = client.post("/manage/accounts/new/", {"form": "account", "name": "nlp", "parent": "lab", "shares": "2"})
    nlp = Account.objects.get(name="nlp")
    assert response.status_code == 302 and nlp.parent == world.lab
    client.post(f"/manage/accounts/{nlp.id}/", {"form": "account", "name": "nlp", "parent": "lab", "shares": "5"})
    entry = AuditEntry.objects.filter(target_type="account")[0]
    assert (entry.actor_name, entry.action, entry.changes) == ("admin", "update", {"shares": [2, 5]})


@pytest.mark.parametrize(
    ("post", "field"),
    [
        ({"name": "bad name!", "shares": "1"}, "name"),
        ({"name": "lab2", "shares": "-1"}, "shares"),
        ({"name": "lab2", "shares": "lots"}, "shares"),
        ({"name": "other", "shares": "1"}, "name"),
    ],
)
def test_bad_account_input_is_a_form_error(world, post, field):
    response = logged_in(world.admin).post("/manage/accounts/new/", {"form": "account", **post})
    assert response.status_code == 200 and field in response.context["account_form"].errors
    assert not AuditEntry.objects.exists()


def test_an_accounts_allowed_and_default_qos_are_set_on_its_page_with_the_apis_rules(world):
    from people.models import Qos

    normal, premium = Qos.objects.create(name="normal"), Qos.objects.create(name="premium", priority=10)
    client = logged_in(world.admin)
    url = f"/manage/accounts/{world.lab.id}/"
    base = {"form": "account", "name": "lab", "shares": "1"}
    html = client.get(url).content.decode()
    assert 'name="allowed_qos"' in html and 'name="default_qos"' in html
    response = client.post(url, {**base, "allowed_qos": ["normal"], "default_qos": "premium"})
    assert "is not in allowed_qos" in str(response.context["account_form"].errors["default_qos"])
    response = client.post(url, {**base, "allowed_qos": ["normal", "premium"], "default_qos": "premium"})
    assert response.status_code == 302
    world.lab.refresh_from_db()
    assert set(world.lab.allowed_qos.all()) == {normal, premium} and world.lab.default_qos == premium
    assert 'value="premium" selected' in client.get(url).content.decode()  # the form shows what is set
    client.post(url, {**base, "default_qos": ""})  # nothing ticked: the parent's, then the site's
    world.lab.refresh_from_db()
    assert not world.lab.allowed_qos.exists() and world.lab.default_qos is None


def test_an_account_cannot_move_under_its_own_child(world):
    child = Account.objects.create(name="child", parent=world.lab)
    response = logged_in(world.admin).post(
        f"/manage/accounts/{world.lab.id}/", {"form": "account", "name": "lab", "parent": child.name, "shares": "1"}
    )
    assert "own ancestor" in str(response.context["account_form"].errors["parent"])


def test_quota_form_has_a_field_per_gpu_model_and_is_audited(world):
    client = logged_in(world.admin)
    html = client.get(f"/manage/accounts/{world.lab.id}/").content.decode()
    assert "Max H100-80GB GPUs" in html and "Max L4 GPUs" in html
    models = client.get(f"/manage/accounts/{world.lab.id}/").context["quota_form"].models
    per_model = {f"model_{models.index('H100-80GB')}": "8"}
    response = client.post(f"/manage/accounts/{world.lab.id}/", {"form": "quota", "max_gpus": "12", **per_model})
    assert response.status_code == 302
    quota = Quota.objects.get(account=world.lab)
    assert (quota.max_gpus, quota.max_gpus_per_model) == (12, {"H100-80GB": 8})
    entry = AuditEntry.objects.get(target_type="quota")
    assert entry.action == "create" and entry.changes["max_gpus"] == [None, 12]
    client.post(f"/manage/accounts/{world.lab.id}/", {"form": "quota", "max_gpus": "16", **per_model})
    assert AuditEntry.objects.filter(target_type="quota")[0].changes == {"max_gpus": [12, 16]}


@pytest.mark.parametrize(
    ("post", "field"),
    [
        ({"borrowing_limit_gpus": "4"}, "borrowing_limit_gpus"),
        ({"max_gpus": "many"}, "max_gpus"),
        ({"max_gpus": "-3"}, "max_gpus"),
        ({"model_0": "x"}, "model_0"),
        ({"max_walltime_seconds": "four hours"}, "max_walltime_seconds"),
    ],
)
def test_bad_quota_input_is_a_form_error(world, post, field):
    response = logged_in(world.admin).post(f"/manage/accounts/{world.lab.id}/", {"form": "quota", **post})
    assert response.status_code == 200 and field in response.context["quota_form"].errors
    assert not Quota.objects.exists() and not AuditEntry.objects.exists()


def test_members_are_added_changed_and_removed_with_audit(world):
    client = logged_in(world.admin)
    url = f"/manage/accounts/{world.other.id}/"
    client.post(url, {"form": "member-add", "user": "dora", "role": "member"})
    membership = Membership.objects.get(user=world.dora, account=world.other)
    client.post(url, {"form": "member-role", "membership": membership.id, "role": "coordinator"})
    assert Membership.objects.get(pk=membership.pk).role == "coordinator"
    client.post(url, {"form": "member-remove", "membership": membership.id})
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert list(AuditEntry.objects.filter(target_type="membership").values_list("action", flat=True)) == [
        "delete",
        "update",
        "create",
    ]
    response = client.post(url, {"form": "member-add", "user": "nobody", "role": "member"})
    assert "user" in response.context["member_form"].errors


def test_audit_log_page_lists_who_changed_what(world):
    client = logged_in(world.admin)
    client.post(f"/manage/accounts/{world.lab.id}/", {"form": "quota", "max_running_jobs": "3"})
    html = client.get("/manage/audit/").content.decode()
    assert "admin" in html and "quota for lab" in html and "<code>max running jobs</code>" in html
    assert "max_running_jobs" not in html  # the field's label, not its name in the code


def test_nodes_page_drain_needs_a_reason_and_resume_is_audited(world, tick):
    submit(world.alice, world.lab, gpus_per_node=2, gpu_model="H100-80GB")
    tick()
    client = logged_in(world.admin)
    html = client.get("/manage/nodes/").content.decode()
    assert "2 / 8 GPUs" in html and "8 x H100-80GB" in html and "4 x L4" in html
    node = Node.objects.get(name="h100-01")
    client.post(f"/manage/nodes/{node.id}/drain/", {"reason": ""})
    assert Node.objects.get(pk=node.pk).state == "up"
    client.post(f"/manage/nodes/{node.id}/drain/", {"reason": "replace GPU 3"})
    node.refresh_from_db()
    assert (node.state, node.reason) == ("drain", "replace GPU 3")
    client.post(f"/manage/nodes/{node.id}/resume/")
    node.refresh_from_db()
    assert node.state == "up"
    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["resume", "drain"]


def test_gpu_hours_by_account_and_its_csv(world):
    day = datetime(2026, 3, 1, tzinfo=UTC)
    done = start(submit(world.alice, world.lab, gpus_per_node=2), day - timedelta(hours=1))
    end(done, day + timedelta(hours=3))  # the hour before the range is not counted
    end(start(submit(world.charlie, world.other, gpus_per_node=1), day), day + timedelta(hours=5))
    client = logged_in(world.admin)
    page = client.get("/manage/cluster/", {"start": "2026-03-01", "end": "2026-03-01"})
    hours = {h.account: (round(h.gpu_hours, 3), h.jobs) for h in page.context["hours"]}
    assert hours == {"lab": (6.0, 1), "other": (5.0, 1)}
    assert 'id="cluster-charts"' in page.content.decode()
    csv = client.get("/manage/cluster/gpu-hours.csv", {"start": "2026-03-01", "end": "2026-03-01"})
    assert csv["Content-Type"] == "text/csv"
    lines = csv.content.decode().splitlines()
    assert lines[0] == "account,gpu_hours,jobs,start,end"
    assert lines[1].startswith("lab,6.000,1,2026-03-01T00:00:00+00:00,2026-03-02T00:00:00+00:00")


def test_gpu_hours_count_running_jobs_to_now_and_shares_as_their_fraction(world):
    from web.figures import gpu_hours_by_account

    day = datetime(2026, 3, 1, tzinfo=UTC)
    start(submit(world.alice, world.lab, nodes=2, gpus_per_node=4), day + timedelta(hours=1))  # still running
    shared = start(submit(world.charlie, world.other, gpu_share=0.5, gpu_model="L4"), day)
    end(shared, day + timedelta(hours=4))
    hours = gpu_hours_by_account(day, day + timedelta(days=1), now=day + timedelta(hours=3))
    assert [(h.account, round(h.gpu_hours, 3), h.jobs) for h in hours] == [("lab", 16.0, 1), ("other", 2.0, 1)]


START = datetime(2026, 3, 1, tzinfo=UTC)


def test_the_wait_distribution_counts_the_jobs_started_in_the_range(world):
    from web.figures import jobs_in_range

    def started(wait: timedelta, at=START + timedelta(hours=2), ended: bool = False):
        job = start(submit(world.alice, world.lab), at, waited=wait)
        if ended:
            end(job, at + timedelta(minutes=30))

    started(timedelta(seconds=10))
    started(timedelta(seconds=50), ended=True)
    started(timedelta(minutes=3), ended=True)
    started(timedelta(hours=30))
    started(timedelta(seconds=1), at=START - timedelta(hours=1))  # before the range (still running in it)
    submit(world.alice, world.lab)  # never started
    waits = jobs_in_range(START, START + timedelta(days=1), now=START + timedelta(days=2)).waits
    bins = {b.label: b.jobs for b in waits}
    assert bins == {
        "< 1 min": 2,
        "1-5 min": 1,
        "5-15 min": 0,
        "15-60 min": 0,
        "1-4 h": 0,
        "4-12 h": 0,
        "12-24 h": 0,
        "> 1 day": 1,
    }


def from_raw_jobs(start: datetime, end: datetime, now: datetime) -> tuple[dict[str, tuple[float, int]], list[int]]:
    """The overview's figures as defined on the job rows: per account, each job's time
    within ``[start, end)`` (to ``now`` while it runs) times its GPUs, and the jobs with
    some time in it; the waits of the jobs that started in it, per bin."""
    from scheduler.core.hours import WAIT_BINS, job_gpus, wait_bin

    accounts: dict[str, tuple[float, int]] = {}
    waits = [0] * len(WAIT_BINS)
    for job in Job.objects.filter(started_at__isnull=False).select_related("account"):
        started, until = job.started_at, job.ended_at or now
        assert started is not None
        seconds = (min(until, end) - max(started, start)).total_seconds()
        if seconds > 0:
            hours, jobs = accounts.get(job.account.name, (0.0, 0))
            gpus = job_gpus(job.nodes, job.gpus_per_node, job.gpu_share)
            accounts[job.account.name] = (hours + gpus * seconds / 3600, jobs + 1)
        if start <= started < end:
            waits[wait_bin(started - job.submitted_at)] += 1
    return {a: (round(h, 6), n) for a, (h, n) in sorted(accounts.items())}, waits


def test_the_overview_shows_the_figures_computed_from_the_raw_jobs(world):
    """Sixty jobs of two accounts, of every shape, started and ended at random minutes
    around a two-day range, some still running: the page (from the hourly rollups and the
    running jobs) shows what the job rows add up to."""
    import random

    import time_machine

    from web.figures import jobs_in_range

    rng = random.Random(11)
    first, last = datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC)
    now = last - timedelta(hours=7, minutes=13)
    for _ in range(60):
        owner, account = rng.choice([(world.alice, world.lab), (world.charlie, world.other)])
        shape: dict[str, Any] = rng.choice(
            [{"gpus_per_node": 1}, {"nodes": 2, "gpus_per_node": 8}, {"gpu_share": 0.25}]
        )
        began = first + timedelta(minutes=rng.randrange(-20 * 60, 44 * 60))
        job = start(submit(owner, account, **shape), began, waited=timedelta(minutes=rng.randrange(0, 3000)))
        finish = began + timedelta(minutes=rng.choice([0, rng.randrange(1, 30 * 60)]))
        if finish <= now and rng.random() < 0.8:
            end(job, finish)
    expected_hours, expected_waits = from_raw_jobs(first, last, now)
    assert len(expected_hours) == 2 and sum(expected_waits) > 20  # the scenario covers what it claims

    with time_machine.travel(now, tick=False):
        page = logged_in(world.admin).get("/manage/cluster/", {"start": "2026-03-02", "end": "2026-03-03"})
    assert {h.account: (round(h.gpu_hours, 6), h.jobs) for h in page.context["hours"]} == expected_hours
    assert [b.jobs for b in jobs_in_range(first, last, now).waits] == expected_waits


@pytest.mark.parametrize("params", [{"start": "yesterday"}, {"start": "2026-03-05", "end": "2026-03-01"}])
def test_a_bad_range_is_a_form_error_and_a_400_csv(world, params):
    client = logged_in(world.admin)
    page = client.get("/manage/cluster/", params)
    assert page.status_code == 200 and page.context["form"].errors
    assert client.get("/manage/cluster/gpu-hours.csv", params).status_code == 400


def embedded_figures(html: str) -> dict[str, dict]:
    import json
    import re

    return {
        name: json.loads(body)
        for name, body in re.findall(r'<script id="(figure-[\w-]+)" type="application/json">(.*?)</script>', html, re.S)
    }


def test_cluster_overview_draws_its_charts_from_bulk_reads(world, tick, django_assert_max_num_queries):
    from django.utils import timezone

    from monitoring.queue import record_queue
    from monitoring.services import record_simulated_samples, rollup_recent

    submit(world.alice, world.lab, gpus_per_node=2)
    submit(world.charlie, world.other, nodes=3, gpus_per_node=8)  # never fits: pending
    tick()
    record_simulated_samples()
    rollup_recent(timezone.now() + timedelta(minutes=1))
    record_queue()
    client = logged_in(world.admin)
    with django_assert_max_num_queries(25):
        html = client.get("/manage/cluster/").content.decode()
    figures = embedded_figures(html)
    assert set(figures) == {
        f"figure-{n}" for n in ("gpu-heatmap", "allocated-utilization", "utilization", "queue", "waits", "gpu-hours")
    }
    assert figures["figure-gpu-heatmap"]["layout"]["meta"]["counts"]["allocated"] == 2
    assert [t["name"] for t in figures["figure-queue"]["data"]] == ["lab", "other"] * 2
    assert sum(figures["figure-waits"]["data"][0]["y"]) == 1
    assert figures["figure-utilization"]["data"][2]["y"]  # the simulated samples, rolled up
    # A site with minutes of readings, charted over a week: those minutes, from where they begin.
    utilization = figures["figure-utilization"]["layout"]
    assert utilization["meta"]["resolution_seconds"] < 3600
    assert utilization["xaxis"]["range"][0] >= (timezone.now() - timedelta(hours=2)).isoformat()
    assert 'id="idle-gpus"' in html


def test_the_overview_counts_every_job_and_node_by_state(world):
    from web.figures import jobs_by_state

    submit(world.alice, world.lab)
    submit(world.alice, world.lab)
    dispatching = start(submit(world.charlie, world.other), datetime(2026, 3, 1, tzinfo=UTC))
    end(start(submit(world.alice, world.lab), datetime(2026, 3, 1, tzinfo=UTC)), datetime(2026, 3, 2, tzinfo=UTC))
    Job.objects.filter(pk=dispatching.pk).update(state="DISPATCHING")
    Node.objects.filter(name="l4-01").update(state="drain")
    counts = jobs_by_state()
    assert counts == {s: 0 for s in counts} | {"PENDING": 2, "DISPATCHING": 1, "COMPLETED": 1}
    assert set(counts) == {s.value for s in JobState}  # zeros included
    page = logged_in(world.admin).get("/manage/cluster/")
    assert page.context["jobs_by_state"] == [("Pending", 2), ("Dispatching", 1), ("Completed", 1)]
    assert page.context["node_states"] == [("drain", 1), ("up", 2)]


def test_accounts_page_has_the_fairshare_bar_chart(world):
    html = logged_in(world.admin).get("/manage/accounts/").content.decode()
    shares, usage = embedded_figures(html)["figure-fairshare"]["data"]
    assert shares["y"] == ["lab", "other"] and usage["name"] == "normalised usage"


@pytest.mark.parametrize("query", [{"end": "0001-01-03"}, {"start": "0001-01-01"}, {"end": "9999-12-31"}])
def test_dates_at_the_calendars_ends_are_form_errors_not_500s(world, client_for, query):
    for url in ("/manage/cluster/", "/manage/cluster/gpu-hours.csv"):
        assert client_for(world.admin).get(url, query).status_code in (200, 400)


def test_a_member_id_that_is_not_a_number_is_refused_cleanly(world, client_for):
    response = client_for(world.admin).post(
        f"/manage/accounts/{world.lab.id}/", {"form": "member-remove", "membership": "abc"}
    )
    assert response.status_code in (200, 302, 400)


def test_the_quota_forms_max_walltime_is_typed_and_shown_as_the_submit_forms(world):
    client = logged_in(world.admin)
    url = f"/manage/accounts/{world.lab.id}/"
    assert client.post(url, {"form": "quota", "max_walltime_seconds": "4h"}).status_code == 302
    assert Quota.objects.get(account=world.lab).max_walltime_seconds == 4 * 3600
    field = client.get(url).context["quota_form"]["max_walltime_seconds"]
    assert (field.label, field.value()) == ("Max walltime", "4h")
    client.post(url, {"form": "quota", "max_walltime_seconds": "1:30:00"})
    assert Quota.objects.get(account=world.lab).max_walltime_seconds == 5400


# --- Users and their own quotas ------------------------------------------------------------


def test_users_page_lists_everyone_with_accounts_identity_and_quota(world):
    Quota.objects.create(user=world.alice, max_gpus=4, max_running_jobs=2)
    page = logged_in(world.admin).get("/manage/users/").content.decode()
    for name in ("alice", "bob", "charlie", "dora", "admin"):
        assert f"<td>{name}</td>" in page
    assert "4 GPUs · 2 running" in page and "lab (coordinator)" in page


def test_a_users_quota_is_set_with_the_apis_rules_audited_and_removed(world):
    client = logged_in(world.admin)
    url = f"/manage/users/{world.alice.id}/"
    form = client.get(url).context["quota_form"]
    assert "guaranteed_gpus" not in form.fields and "borrowing_limit_gpus" not in form.fields  # accounts only

    bad = client.post(url, {"form": "quota", "max_gpus": "-3"})
    assert bad.status_code == 200 and "max_gpus" in bad.context["quota_form"].errors
    assert not Quota.objects.filter(user=world.alice).exists()

    response = client.post(url, {"form": "quota", "max_gpus": "8", "max_walltime_seconds": "7200"})
    assert response.status_code == 302
    quota = Quota.objects.get(user=world.alice)
    assert (quota.max_gpus, quota.max_walltime_seconds, quota.account) == (8, 7200, None)
    assert AuditEntry.objects.filter(target_type="quota", actor=world.admin, action="create").exists()

    client.post(url, {"form": "quota-delete"})
    assert not Quota.objects.filter(user=world.alice).exists()
    assert AuditEntry.objects.filter(target_type="quota", action="delete").exists()


def test_a_researcher_cannot_touch_a_users_quota(world):
    url = f"/manage/users/{world.alice.id}/"
    assert logged_in(world.alice).post(url, {"form": "quota", "max_gpus": "999"}).status_code == 403
    assert not Quota.objects.filter(user=world.alice).exists()


def test_a_users_quota_limits_their_submissions(world, client_for):
    logged_in(world.admin).post(f"/manage/users/{world.alice.id}/", {"form": "quota", "max_walltime_seconds": "600"})
    body = {"name": "x", "command": "true", "gpus_per_node": 1, "walltime_seconds": 3600}
    response = client_for(world.alice).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400 and "walltime_seconds" in response.json()


def test_an_accounts_idle_rule_is_set_on_its_page_checked_by_the_api_and_audited(world, client_for):
    client = logged_in(world.admin)
    body = {"form": "account", "name": "lab", "parent": "", "shares": "1"}
    url = f"/manage/accounts/{world.lab.id}/"
    bad = client.post(url, {**body, "idle_below_pct": "150", "idle_action": "cancel"})
    assert bad.status_code == 200 and "idle_below_pct" in bad.context["account_form"].errors

    client.post(url, {**body, "idle_below_pct": "10", "idle_minutes": "45", "idle_action": "requeue"})

    world.lab.refresh_from_db()
    assert (world.lab.idle_below_pct, world.lab.idle_minutes, world.lab.idle_action) == (10.0, 45, "requeue")
    assert AuditEntry.objects.filter(target_type="account", changes__idle_action=["", "requeue"]).exists()
    api = client_for(world.admin).patch(f"/api/v1/accounts/{world.lab.id}/", {"idle_action": "delete"}, format="json")
    assert api.status_code == 400 and "idle_action" in api.json()


def test_the_overview_shows_free_gpus_no_pending_request_can_use(world, tick):
    """A 2-GPU job takes all 64 CPUs of the 4-GPU L4 node: its other 2 GPUs are free but
    stranded for the 8-GPU request that waits, while the idle H100 node's are not. The
    tick works it out and keeps it for the page."""
    from scheduler.models import TickState

    submit(world.alice, world.lab, gpus_per_node=2, cpus_per_node=64, gpu_model="L4")
    tick()
    assert TickState.objects.get().stranded["waiting"] == 0
    assert TickState.objects.get().stranded["models"]["L4"] == [2.0, 2.0]  # nothing waits: all of it
    submit(world.charlie, world.other, gpus_per_node=8)
    submit(world.charlie, world.other, nodes=3, gpus_per_node=8)  # never fits: stays pending
    tick()
    stored = TickState.objects.get().stranded
    assert stored == {"waiting": 1, "models": {"H100-80GB": [8.0, 0.0], "L4": [2.0, 2.0]}}
    html = logged_in(world.admin).get("/manage/cluster/").content.decode()
    assert table_rows(html, "stranded") == [["H100-80GB", "8", "0"], ["L4", "2", "2"]]
    assert "(1 job waiting then)" in html


def table_rows(html: str, table_id: str) -> list[list[str]]:
    """The text of each body row's cells of the table with this id."""
    import re

    body = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    ]


def test_the_overview_shows_staff_the_last_days_fairness_and_who_is_starving(world, settings):
    from django.utils import timezone

    from monitoring.fairness import watch
    from tests.builders import finished

    settings.FAIRNESS_WATCH_BELOW = 0.8
    now = timezone.now()
    finished(world.alice, world.lab, now - timedelta(hours=1), waited=timedelta(0), ran=timedelta(hours=1))
    finished(world.charlie, world.other, now - timedelta(hours=1), waited=timedelta(hours=9), ran=timedelta(hours=1))
    assert watch(now) == "opened"
    html = logged_in(world.admin).get("/manage/cluster/").content.decode()
    assert "Jain's index over the accounts' mean slowdowns: <strong>0.599</strong>" in html
    assert "the worst, other, at 1.82\N{MULTIPLICATION SIGN} the mean" in html
    assert "Account <strong>other</strong> is starving" in html
    switch = Simulation.objects.get(kind=Simulation.Kind.SWITCH)
    assert f'href="/manage/simulations/{switch.id}/" id="switch-link"' in html
    for researcher in (world.alice, world.charlie, world.bob):
        assert logged_in(researcher).get("/manage/cluster/").status_code == 403


def test_a_fair_day_names_no_starving_account(world):
    html = logged_in(world.admin).get("/manage/cluster/").content.decode()
    assert "Jain's index over the accounts' mean slowdowns: <strong>1.000</strong>" in html
    assert 'id="starving"' not in html and "No GPU job ended in the last 24 hours." in html


def test_a_policy_switch_shows_each_accounts_slowdown_under_both(world):
    run = Simulation.objects.create(
        kind=Simulation.Kind.SWITCH,
        days=7,
        params={"policy": "stretch-las-preempt"},
        state=Simulation.State.DONE,
        result={
            "days": 7,
            "jobs": 20,
            "policy": "stretch-las-preempt",
            "rows": [
                {"account": "lab", "jobs": 12, "today": 3.64, "switched": 3.9},
                {"account": "other", "jobs": 8, "today": 11.0, "switched": None},
            ],
            "jain_today": 0.798,
            "jain_switched": 0.906,
            "worst_ratio_today": 1.67,
            "worst_ratio_switched": 1.24,
        },
    )
    assert logged_in(world.alice).get(f"/manage/simulations/{run.id}/").status_code == 403
    html = logged_in(world.admin).get(f"/manage/simulations/{run.id}/").content.decode()
    assert "<h1>Switching to stretch-las-preempt</h1>" in html
    assert "0.798 under the site's policy, 0.906 under stretch-las-preempt" in html
    assert '<tr id="row-other"><td>other</td><td class="num">8</td>' in html
    assert '<td class="num">11.00</td><td class="num">-</td>' in html


def test_the_nodes_page_shows_staff_a_gpus_foreign_process_its_owner_and_rule(world):
    from monitoring.audit import audit_processes

    now = datetime.now(UTC)
    report_processes("h100-02", 6, [gpu_process(4321, uid=4000, user="mallory", command="xmrig", mib=2048)], now)
    audit_processes(now)
    html = logged_in(world.admin).get("/manage/nodes/").content.decode()
    row = html[html.index('id="node-h100-02"') :]
    row = row[: row.index("</tr>")]
    assert "GPU 6: foreign process" in row
    assert "pid 4321 (xmrig) of mallory (uid 4000), 2048 MiB" in row
    assert "no job of the portal holds this GPU" in row and "No new jobs on this GPU until it is gone." in row
    assert "xmrig" not in html[: html.index('id="node-h100-02"')]  # on its node's row only
    denied = logged_in(world.alice).get("/manage/nodes/")
    assert denied.status_code == 403 and "xmrig" not in denied.content.decode()


def test_the_cluster_overview_shows_the_latest_backtest_of_the_start_predictions(world):
    assert "has not run yet" in logged_in(world.admin).get("/manage/cluster/").content.decode()
    StartBacktest.objects.create(
        ran_at=datetime(2026, 3, 1, 6, tzinfo=UTC), days=7, jobs=7000, judged=900, p50_coverage=0.5, p90_coverage=0.9
    )
    StartBacktest.objects.create(
        ran_at=datetime(2026, 3, 1, 12, tzinfo=UTC),
        days=7,
        jobs=7000,
        judged=800,
        p50_coverage=0.55,
        p90_coverage=0.8,
        p50_error_s=720.0,
    )
    html = logged_in(world.admin).get("/manage/cluster/").content.decode()
    assert 'id="start-backtest">80% of jobs started before their p90 and 55% before their p50; p50 error 12 min' in html
    assert "replayed at 2026-03-01 12:00 UTC" in html
