"""The GPU-hours page (``sreport`` in the browser): a table, a stacked chart per day, week
or month whose bars add up to the table, CSV; each reader sees only what the API lets
them see."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from scheduler.reads.usage import attempts_in, day_span, period_starts, usage, usage_over_time
from tests.builders import join, make_account, run_attempt, submit

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 10, tzinfo=UTC)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def figure_of(html: str) -> dict:
    start = html.index('<script id="figure-usage" type="application/json">') + len(
        '<script id="figure-usage" type="application/json">'
    )
    return json.loads(html[start : html.index("</script>", start)])


def test_the_page_shows_table_chart_and_csv_and_each_reader_only_their_share(world):
    mine = submit(world.alice, world.lab, gpus_per_node=2)
    run_attempt(mine, DAY + timedelta(hours=1), DAY + timedelta(days=1, hours=1), gpus=2)  # 23 h + 1 h, 2 GPUs
    theirs = submit(world.charlie, world.other)
    run_attempt(theirs, DAY, DAY + timedelta(hours=5))
    query = {"start": "2026-03-10", "end": "2026-03-11", "group_by": "user", "bucket": "day"}

    html = logged_in(world.alice).get("/usage/", query).content.decode()

    assert "<td>alice</td>" in html and "48.00" in html and "charlie" not in html
    figure = figure_of(html)
    [bars] = figure["data"]
    assert (bars["name"], bars["x"], bars["y"]) == ("alice", ["2026-03-10", "2026-03-11"], [46.0, 2.0])
    assert figure["layout"]["barmode"] == "stack"
    assert "/api/v1/usage/?start=2026-03-10&amp;end=2026-03-11&amp;group_by=user&amp;output=csv" in html
    staff = logged_in(world.admin).get("/usage/", query).content.decode()
    assert "<td>charlie</td>" in staff and {t["name"] for t in figure_of(staff)["data"]} == {"alice", "charlie"}


def test_a_bad_period_is_a_form_error_not_a_500(world):
    response = logged_in(world.alice).get("/usage/", {"start": "2026-03-12", "end": "2026-03-10"})

    assert response.status_code == 200
    assert response.context["form"].errors["start"] == ["Must not be after the last day."]


@pytest.mark.parametrize("bucket", ["day", "week", "month"])
def test_the_periods_add_up_to_the_totals_exactly(world, bucket):
    """Recomputed from random attempts: cutting the period at day, week or month
    boundaries loses or adds nothing."""
    rng = random.Random(bucket)
    vision = make_account("vision")
    join(world.alice, vision)
    for _ in range(30):
        job = submit(world.alice, rng.choice([world.lab, vision]), gpus_per_node=rng.choice([1, 2, 4]))
        begin = DAY - timedelta(days=20) + timedelta(hours=rng.randrange(0, 24 * 70))
        run_attempt(job, begin, begin + timedelta(minutes=rng.randrange(1, 60 * 24 * 9)), gpus=job.gpus_per_node)
    start, end = day_span((DAY - timedelta(days=10)).date(), (DAY + timedelta(days=40)).date())
    held = attempts_in(start, end, end)

    starts, series = usage_over_time(held, start, end, "account", bucket)

    totals = {row.group: row.gpu_hours for row in usage(held, start, end, "account")}
    assert set(series) == set(totals)
    for name, values in series.items():
        assert sum(values) == pytest.approx(totals[name], abs=1e-9)
    assert starts == period_starts(start, end, bucket) and starts[0] <= start
