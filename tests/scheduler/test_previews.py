"""A change to an account's shares or limits previewed on the site's own history: the
last days' jobs replayed as the accounts are and with the change, per account."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.choices import JobState
from scheduler.models import Job, Simulation
from scheduler.previews import MIN_JOBS, TooLittleHistory, preview, site_history
from tests.builders import submit

pytestmark = pytest.mark.django_db


def history(world, per_account: int = 15) -> None:
    """Two accounts each submitting ``per_account`` 8-GPU, one-hour H100 jobs within a
    minute, two days ago, on a site of 16 H100s: they contend for the same GPUs."""
    start = timezone.now() - timedelta(days=2)
    for i in range(per_account):
        for owner, account in ((world.alice, world.lab), (world.charlie, world.other)):
            job = submit(owner, account, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2 * 3600)
            submitted = start + timedelta(seconds=2 * i + (account == world.other))
            Job.objects.filter(pk=job.pk).update(
                state=JobState.COMPLETED,
                submitted_at=submitted,
                started_at=submitted + timedelta(minutes=5),
                ended_at=submitted + timedelta(minutes=65),
            )


def test_the_history_is_the_jobs_that_ran_in_the_window_on_a_clock_from_the_first(world):
    history(world, per_account=2)
    old = submit(world.alice, world.lab, gpus_per_node=1)
    Job.objects.filter(pk=old.pk).update(submitted_at=timezone.now() - timedelta(days=40))
    submit(world.alice, world.lab, gpus_per_node=1)  # still waiting: did not run
    trace = site_history(timezone.now(), 7)
    assert len(trace) == 4 and trace[0].submit_s == 0
    assert {(j.gpus, j.duration_s, j.walltime_s) for j in trace} == {(8, 3600, 7200)}


def test_too_little_history_says_how_much_there_is(world):
    history(world, per_account=2)
    with pytest.raises(TooLittleHistory, match=f"4 jobs ran in the last 7 days; a preview needs at least {MIN_JOBS}"):
        preview("lab", shares=5, limits=None, days=7, now=timezone.now())


def test_more_shares_for_one_account_shorten_its_waits_at_the_others_expense(world):
    history(world)
    told: list[float] = []
    result = preview("other", shares=50, limits=None, days=7, now=timezone.now(), progress=told.append)
    assert told == [0.5, 1.0] and result.jobs == 30
    rows = {row.account: row for row in result.rows}
    assert rows["other"].proposed.avg_wait_s < rows["other"].today.avg_wait_s
    assert rows["lab"].proposed.avg_wait_s > rows["lab"].today.avg_wait_s
    for row in rows.values():  # every job still runs, as long as before
        assert (row.proposed.jobs, row.proposed.gpu_hours) == (row.today.jobs, row.today.gpu_hours) == (15, 120.0)


def test_a_tighter_quota_makes_the_account_wait_longer(world):
    history(world)
    result = preview("lab", shares=None, limits={"max_gpus": 8}, days=7, now=timezone.now())
    rows = {row.account: row for row in result.rows}
    assert rows["lab"].wait_change_s > 0 and rows["other"].wait_change_s < 0


@pytest.mark.parametrize(
    ("limits", "why"),
    [
        ({"max_gpus": 4}, "account lab would allow at most 4 GPUs at once; it needs 8"),
        ({"max_walltime_seconds": 3600}, "account lab would allow at most 1 h of walltime; it asks for 2 h"),
        ({"max_running_jobs": 0}, "account lab would run no jobs at all (max running jobs 0)"),
        (
            {"guaranteed_gpus": 2, "borrowing_limit_gpus": 2},
            "account lab would hold at most 4 GPUs (its guarantee of 2 plus 2 borrowed); it needs 8",
        ),
    ],
    ids=["GPU cap below its jobs", "walltime cap below theirs", "no running jobs", "guarantee and borrowing"],
)
def test_a_change_no_history_job_of_the_account_could_run_under_says_which_and_why_and_previews_the_rest(
    world, limits, why
):
    history(world)
    result = preview("lab", shares=None, limits=limits, days=7, now=timezone.now())
    lab_jobs = set(Job.objects.filter(account=world.lab).values_list("id", flat=True))
    assert {job.job_id for job in result.impossible} == lab_jobs
    assert {(job.account, job.gpus, job.why) for job in result.impossible} == {("lab", 8, why)}
    rows = {row.account: row for row in result.rows}
    assert (rows["lab"].today.jobs, rows["lab"].proposed.jobs) == (15, 0)
    assert rows["other"].proposed.jobs == 15 and rows["other"].wait_change_s < 0  # the rest, previewed


def test_the_jobs_a_change_leaves_runnable_are_not_listed(world):
    history(world)
    assert preview("lab", shares=None, limits={"max_gpus": 8}, days=7, now=timezone.now()).impossible == ()


# --- Asked for, run, read back -----------------------------------------------------------


def ask(client, account, **body):  # type: ignore[no-untyped-def]
    return client.post(f"/api/v1/accounts/{account.pk}/preview/", body, format="json")


def test_staff_ask_for_a_preview_and_read_its_figures(world, client_for, django_capture_on_commit_callbacks):
    history(world)
    client = client_for(world.admin)
    with django_capture_on_commit_callbacks(execute=True):  # inline: it runs after commit
        response = ask(client, world.other, days=7, shares=50)
    assert response.status_code == 202, response.json()
    shown = client.get(f"/api/v1/simulations/{response.json()['id']}/").json()
    assert (shown["state"], shown["progress"], shown["error"]) == ("done", 1.0, "")
    rows = {row["account"]: row for row in shown["result"]["rows"]}
    assert rows["other"]["proposed"]["avg_wait_s"] < rows["other"]["today"]["avg_wait_s"]
    world.other.refresh_from_db()
    assert world.other.shares == 1  # nothing saved


@pytest.mark.parametrize(
    "body,field",
    [
        ({"days": 7}, "shares"),  # nothing proposed
        ({"days": 3, "shares": 2}, "days"),
        ({"shares": -1}, "shares"),
        ({"limits": {"max_gpuz": 8}}, "limits"),
        ({"shares": 2, "flavour": "x"}, "flavour"),
    ],
)
def test_a_bad_preview_request_is_a_400_naming_the_field(world, client_for, body, field):
    response = ask(client_for(world.admin), world.lab, **body)
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Simulation.objects.exists()


def test_a_preview_of_a_cut_below_the_largest_jobs_is_done_and_lists_them(
    world, client_for, django_capture_on_commit_callbacks
):
    history(world)
    client = client_for(world.admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = ask(client, world.lab, days=7, limits={"max_gpus": 4})
    shown = client.get(f"/api/v1/simulations/{response.json()['id']}/").json()
    assert (shown["state"], shown["error"]) == ("done", "")
    impossible = shown["result"]["impossible"]
    assert len(impossible) == 15 and {job["why"] for job in impossible} == {
        "account lab would allow at most 4 GPUs at once; it needs 8"
    }
    page = client.get(f"/manage/simulations/{response.json()['id']}/").content.decode()
    assert "15 jobs of the history could never run with this change" in page
    assert "account lab would allow at most 4 GPUs at once; it needs 8" in page


def test_only_staff_preview_or_read_previews(world, client_for):
    client = client_for(world.bob)  # lab's coordinator, not staff
    assert ask(client, world.lab, shares=3).status_code == 403
    assert client.get("/api/v1/simulations/").status_code == 403


def test_too_little_history_ends_the_preview_saying_so(world, client_for, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = ask(client_for(world.admin), world.lab, shares=3)
    row = Simulation.objects.get(pk=response.json()["id"])
    assert row.state == "failed" and "a preview needs at least" in row.error and row.finished_at is not None


def test_a_preview_past_its_time_limit_fails_saying_so(world, monkeypatch, settings):
    from celery.exceptions import SoftTimeLimitExceeded

    from scheduler import simulations

    def too_slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise SoftTimeLimitExceeded()

    settings.PREVIEW_TIME_LIMIT_SECONDS = 60
    monkeypatch.setattr(simulations, "preview", too_slow)
    row = Simulation.objects.create(kind="preview", account=world.lab, days=7, params={"shares": 2, "limits": None})
    simulations.run_simulation(row.pk)
    row.refresh_from_db()
    assert row.state == "failed" and row.error == "The replays took longer than 60 s; try a shorter window."


def test_the_account_page_asks_and_the_preview_page_shows_table_and_chart(world, django_capture_on_commit_callbacks):
    from django.test import Client

    history(world)
    client = Client()
    client.force_login(world.admin)
    assert 'id="preview-form"' in client.get(f"/manage/accounts/{world.other.pk}/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/manage/accounts/{world.other.pk}/preview/", {"days": 7, "shares": 50})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert 'id="simulation-table"' in page and 'id="chart-simulation"' in page and 'id="row-other"' in page
    row = page[page.index('id="row-other"') :].split("</tr>")[0]
    assert '<td class="num change">-' in row  # other waits less with more shares


# --- The simulator page: replays of a trace or the site's history ------------------------------

TRACE = "job_id,submit_s,duration_s,num_gpus,vc\n" + "".join(
    f"{i},{i * 60},{3600 + 60 * i},{1 + i % 8},{'vc' + str(i % 3)}\n" for i in range(40)
)


def staff_client(world):  # type: ignore[no-untyped-def]
    from django.test import Client

    client = Client()
    client.force_login(world.admin)
    return client


def test_an_uploaded_trace_is_replayed_under_each_chosen_policy(world, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = staff_client(world)
    body = {"policies": ["fifo", "fairshare-backfill"], "nodes": 2, "gpus_per_node": 8, "days": 7}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/manage/simulator/", {**body, "trace": SimpleUploadedFile("t.csv", TRACE.encode())})
    assert response.status_code == 302
    run = Simulation.objects.get()
    assert (run.kind, run.state, run.trace_name) == ("replay", "done", "t.csv") and run.result is not None
    assert [row["policy"] for row in run.result["policies"]] == ["fifo", "fairshare-backfill"]
    assert all(row["jobs"] == 40 for row in run.result["policies"]) and run.result["capacity_gpus"] == 16
    page = client.get(response["Location"]).content.decode()
    assert 'id="row-fifo"' in page and 'id="chart-simulation"' in page


def test_a_bad_trace_row_is_a_form_error_naming_its_line_and_nothing_runs(world):
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = "job_id,submit_s,duration_s,num_gpus,vc\n1,0,60,2,a\n2,soon,60,2,b\n"
    response = staff_client(world).post(
        "/manage/simulator/", {"policies": ["fifo"], "days": 7, "trace": SimpleUploadedFile("bad.csv", bad.encode())}
    )
    assert response.status_code == 200
    assert (
        "the trace:3: job_id, submit_s, duration_s and num_gpus must be integers"
        in response.context["form"].errors["trace"][0]
    )
    assert not Simulation.objects.exists()


def test_the_sites_history_is_replayed_on_its_own_nodes(world, django_capture_on_commit_callbacks):
    history(world, per_account=3)
    with django_capture_on_commit_callbacks(execute=True):
        staff_client(world).post("/manage/simulator/", {"policies": ["fifo-backfill"], "days": 7})
    run = Simulation.objects.get()
    assert (
        run.result is not None and run.state == "done" and run.result["jobs"] == 6 and run.result["capacity_gpus"] == 20
    )


def test_only_staff_use_the_simulator(world):
    from django.test import Client

    client = Client()
    client.force_login(world.alice)
    assert client.get("/manage/simulator/").status_code == 403
