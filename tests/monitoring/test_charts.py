"""Chart builders: plain data in, a Plotly figure dict out, checked without a database or
a browser. Every figure must pass Plotly's own schema validation (``go.Figure``)."""

from __future__ import annotations

from datetime import timedelta

import plotly.graph_objects as go
import pytest

from monitoring import charts
from monitoring.charts import GpuCell, QueueRow, WaitBin
from monitoring.series import Point, Series
from scheduler.core.fairshare import ShareRow
from tests.builders import T0


def valid(figure: dict) -> dict:
    """The figure, after Plotly's validation accepted every property in it."""
    go.Figure(figure)
    return figure


def band(metric: str, *values: float) -> Series:
    points = tuple(Point(T0 + timedelta(minutes=i), v - 1, v, v + 1) for i, v in enumerate(values))
    return Series(metric, 60, 60, points)


def test_the_band_is_the_mean_between_min_and_max():
    figure = valid(charts.band_figure(band("utilization", 2, 5)))
    high, low, mean = figure["data"]
    assert (high["y"], low["y"], mean["y"]) == ([3, 6], [1, 4], [2, 5])
    assert low["fill"] == "tonexty" and mean["x"][0] == T0.isoformat()
    assert figure["layout"]["yaxis"]["title"]["text"] == "%"


def test_job_figure_stacks_one_band_per_metric_on_a_shared_time_axis():
    metrics = [band(m, 10, 20, 30) for m in ("utilization", "memory_used", "temperature", "power")]
    figure = valid(charts.job_gpu_figure(metrics, span=(T0, T0 + timedelta(minutes=2))))
    assert len(figure["data"]) == 4 * 3
    assert [t["yaxis"] for t in figure["data"][2::3]] == ["y", "y2", "y3", "y4"]
    layout = figure["layout"]
    assert layout["xaxis2"]["matches"] == "x" and layout["xaxis4"]["showticklabels"]
    assert layout["xaxis"]["range"] == [T0.isoformat(), (T0 + timedelta(minutes=2)).isoformat()]
    assert not layout["xaxis"]["showticklabels"]
    assert layout["yaxis4"]["title"]["text"] == "Power (W)"
    assert [m["metric"] for m in layout["meta"]] == ["utilization", "memory_used", "temperature", "power"]


CELLS = [
    GpuCell("n1", 0, "allocated", 90.0, job=7, account="lab"),
    GpuCell("n1", 1, "allocated, idle", 1.0, job=8, account="other"),
    GpuCell("n1", 2, "free", 0.0),
    GpuCell("n2", 0, "unavailable"),
    GpuCell("n2", 1, "allocated", None, job=9, account="lab"),
]


def test_heatmap_puts_nodes_across_gpus_down_and_codes_each_state():
    figure = valid(charts.allocation_heatmap(CELLS, ["n1", "n2"]))
    (heatmap,) = figure["data"]
    assert heatmap["x"] == ["n1", "n2"] and heatmap["y"] == [0, 1, 2]
    assert heatmap["z"] == [[1, 3], [2, 1], [0, None]]  # n2 has no GPU 2
    assert heatmap["text"][1][0] == "allocated, idle, job 8 (other), 1% busy"
    assert heatmap["colorbar"]["ticktext"] == list(charts.GPU_STATES)
    assert figure["layout"]["meta"]["counts"] == {"free": 1, "allocated": 2, "allocated, idle": 1, "unavailable": 1}


def test_heatmap_draws_mig_slices_within_their_gpus_row_not_past_the_gpus():
    """A node of 8 whole GPUs beside one whose 8 GPUs are split in two (slices numbered
    8-23, after the GPUs): the GPU axis runs 0-7 for both, each slice inside its GPU."""
    whole = [GpuCell("whole", i, "free") for i in range(8)]
    split = [
        GpuCell("mig", 8 + 2 * gpu + j, "allocated", job=5, account="lab", parent=gpu)
        for gpu in range(8)
        for j in range(2)
    ]
    figure = valid(charts.allocation_heatmap(whole + split, ["whole", "mig"]))
    gpus, slices = figure["data"]
    assert figure["layout"]["yaxis"]["range"] == [7.5, -0.5]
    assert gpus["y"] == list(range(8)) and [row[0] for row in gpus["z"]] == [0] * 8
    assert all(-0.5 < y < 7.5 for y in slices["y"]) and slices["y"][2:4] == [0.75, 1.25]  # GPU 1's two halves
    assert [row[1] for row in slices["z"]] == [1] * 16 and [row[0] for row in slices["z"]] == [None] * 16
    assert slices["text"][3][1].startswith("MIG slice 2 of 2 (GPU 11): allocated, job 5 (lab)")
    assert gpus["showscale"] and not slices["showscale"]  # one colour bar


def test_heatmap_of_a_few_dozen_nodes_names_them_down_the_side():
    nodes = [f"node-{i:02d}" for i in range(30)]
    cells = [(node, gpu, "free", None, None, "", None) for node in nodes for gpu in range(4)]
    figure = valid(charts.allocation_heatmap(cells, nodes))
    trace = figure["data"][0]
    assert trace["y"] == nodes and trace["x"] == [0, 1, 2, 3] and len(trace["z"]) == 30
    assert figure["layout"]["meta"]["nodes_down"] and figure["layout"]["yaxis"]["showticklabels"]


def test_heatmap_of_a_thousand_nodes_stays_one_trace_of_eight_rows():
    cells = [GpuCell(f"n{n:04d}", i, "free", 0.0) for n in range(1000) for i in range(8)]
    figure = valid(charts.allocation_heatmap(cells, [f"n{n:04d}" for n in range(1000)]))
    assert len(figure["data"]) == 1 and len(figure["data"][0]["z"]) == 8
    assert not figure["layout"]["xaxis"]["showticklabels"]  # 1,000 names would be noise


def test_allocated_utilization_flags_idle_gpus_in_red():
    figure = valid(charts.allocated_utilization_figure(CELLS, idle_below=5.0, window="last 1 min"))
    (bars,) = figure["data"]
    assert bars["y"][0] == 1 and bars["y"][9] == 1 and sum(bars["y"]) == 2  # n2:1 has no samples
    assert bars["marker"]["color"][0] == charts.IDLE_COLOR and bars["marker"]["color"][1] != charts.IDLE_COLOR
    assert figure["layout"]["title"]["text"] == (
        "Allocated GPUs by utilization (last 1 min): 1 of 3 idle, 1 without samples"
    )


@pytest.mark.parametrize(
    "utilization, bar",
    [(0.0, 0), (9.99, 0), (10.0, 1), (89.9, 8), (90.0, 9), (100.0, 9), (104.0, 9)],
    ids=["0%", "just under 10%", "10%", "89.9%", "90%", "100% in the last bar", "over 100% in the last bar"],
)
def test_allocated_utilization_bars_are_10_percent_wide(utilization, bar):
    bars = charts.allocated_utilization_figure([GpuCell("n1", 0, "allocated", utilization)], 5.0, "1 min")["data"][0]
    assert bars["y"] == [1 if i == bar else 0 for i in range(10)]


def test_queue_is_stacked_by_account_with_missing_rows_as_zero():
    later = T0 + timedelta(minutes=1)
    rows = [QueueRow(T0, "lab", 3, 1), QueueRow(T0, "other", 2, 0), QueueRow(later, "lab", 1, 2)]
    figure = valid(charts.queue_figure(rows))
    pending = [t for t in figure["data"] if t["stackgroup"] == "pending"]
    running = [t for t in figure["data"] if t["stackgroup"] == "running"]
    assert [t["name"] for t in pending] == ["lab", "other"] == [t["name"] for t in running]
    assert pending[1]["y"] == [2, 0] and running[0]["y"] == [1, 2]
    assert all(t["yaxis"] == "y2" and not t["showlegend"] for t in running)
    # The legend shows the pending traces: each account's running trace wears its colour.
    assert [t["line"]["color"] for t in pending] == [t["line"]["color"] for t in running]
    assert pending[0]["line"]["color"] != pending[1]["line"]["color"]


def test_wait_distribution_counts_the_jobs_in_its_title():
    figure = valid(charts.wait_figure([WaitBin("< 1 min", 4), WaitBin("1-5 min", 1)]))
    assert figure["data"][0]["y"] == [4, 1]
    assert figure["layout"]["title"]["text"] == "Wait before start (5 jobs started in the range)"
    assert "(1 job started" in charts.wait_figure([WaitBin("< 1 min", 1)])["layout"]["title"]["text"]


def test_gpu_hours_bars_are_largest_first():
    figure = valid(charts.gpu_hours_figure([("a", 1.0), ("b", 5.0), ("c", 1.0)]))
    assert figure["data"][0]["x"] == ["b", "a", "c"]


def share(account: str, user: str = "", depth: int = 0, shares: float = 0.5, usage: float = 0.2) -> ShareRow:
    return ShareRow(account, user, depth, 1, shares, shares, 0.0, usage, usage, 1.0, None, None)


def test_fairshare_compares_shares_and_usage_of_accounts_only():
    rows = [share("lab", shares=0.75, usage=0.9), share("lab", "alice"), share("vision", depth=1, usage=0.1)]
    figure = valid(charts.fairshare_figure(rows))
    shares, usage = figure["data"]
    assert shares["y"] == ["lab", "\u00a0\u00a0vision"]
    assert (shares["x"], usage["x"]) == ([0.75, 0.5], [0.9, 0.1])


@pytest.mark.parametrize(
    "build",
    [
        lambda: charts.queue_figure([]),
        lambda: charts.wait_figure([]),
        lambda: charts.gpu_hours_figure([]),
        lambda: charts.allocation_heatmap([], []),
        lambda: charts.allocated_utilization_figure([], 5.0, "last 1 min"),
        lambda: charts.job_gpu_figure([band("utilization")]),
    ],
    ids=["queue", "waits", "gpu-hours", "heatmap", "allocated", "job"],
)
def test_no_data_is_an_empty_but_valid_figure(build):
    valid(build())


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: charts.queue_figure([]), "No job waited or ran in this range."),
        (lambda: charts.wait_figure([]), "No job started in this range."),
        (lambda: charts.gpu_hours_figure([]), "No GPU time in this range."),
        (lambda: charts.band_figure(band("utilization")), "No GPU samples in this range."),
        (lambda: charts.allocated_utilization_figure([], 5.0, "last 1 min"), "No GPU is allocated now."),
    ],
    ids=["queue", "waits", "gpu-hours", "utilization", "allocated"],
)
def test_an_empty_chart_says_why_in_its_middle(build, words):
    layout = valid(build())["layout"]
    assert [(note["text"], note["x"], note["y"]) for note in layout["annotations"]] == [(words, 0.5, 0.5)]


def test_an_empty_queue_keeps_no_room_for_a_legend_it_does_not_have():
    empty = charts.queue_figure([])["layout"]
    assert "legend" not in empty and empty["margin"] == charts.MARGIN
    full = charts.queue_figure([QueueRow(T0, "lab", 1, 0)])["layout"]
    assert full["margin"]["b"] > charts.MARGIN["b"] and "annotations" not in full


def test_a_range_chart_shows_the_whole_range_and_marks_sparse_points():
    end = T0 + timedelta(days=7)
    figure = valid(charts.band_figure(band("utilization", 50), span=(T0, end)))
    assert figure["layout"]["xaxis"]["range"] == [T0.isoformat(), end.isoformat()]
    assert figure["data"][2]["mode"] == "lines+markers"  # one point draws no line
    dense = valid(charts.band_figure(band("utilization", *range(100))))
    assert dense["data"][2]["mode"] == "lines" and "range" not in dense["layout"]["xaxis"]
    queue = valid(charts.queue_figure([QueueRow(T0, "lab", 1, 0)], span=(T0, end)))
    assert queue["layout"]["xaxis2"]["range"] == [T0.isoformat(), end.isoformat()]
