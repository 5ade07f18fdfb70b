"""Chart builders, pure: plain data in, a Plotly figure as a dict out.

The page embeds the dict with ``json_script`` and ``static/js/charts.js`` passes it to
``Plotly.newPlot`` (plotly.js from the installed ``plotly`` package's own bundle, served
as a static file, never a CDN). Figures are plain dicts in Plotly's JSON schema, built
without ``plotly.graph_objects``: validating an 8,000-cell heatmap would cost more than
the page's queries. The tests pass every figure through ``plotly.graph_objects.Figure``,
which checks it against the schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from monitoring.series import Series
from scheduler.core.fairshare import ShareRow

UNITS = {"utilization": "%", "memory_used": "MiB", "temperature": "°C", "power": "W"}
TITLES = {
    "utilization": "GPU utilization",
    "memory_used": "GPU memory used",
    "temperature": "Temperature",
    "power": "Power",
}
MARGIN = {"l": 60, "r": 20, "t": 40, "b": 40}
#: One colour per series where a chart draws the same names twice (an account's pending
#: and running jobs): Plotly's own qualitative palette, assigned by name, not by trace.
PALETTE = (
    "#636efa",
    "#ef553b",
    "#00cc96",
    "#ab63fa",
    "#ffa15a",
    "#19d3f3",
    "#ff6692",
    "#b6e880",
    "#ff97ff",
    "#fecb52",
)
BAND_FILL = "rgba(31, 119, 180, 0.2)"
IDLE_COLOR = "#d62728"


#: Lines of at most this many points get markers too (a lone point draws no line).
SPARSE = 60

Span = tuple[datetime, datetime]


def _figure(data: list[dict[str, Any]], title: str, **layout: Any) -> dict[str, Any]:
    return {"data": data, "layout": {"title": {"text": title}, "margin": MARGIN, **layout}}


def _no_data(words: str) -> dict[str, Any]:
    """The layout of a chart with nothing to draw: its axes stay, the words say why in the
    middle (an empty frame alone reads as a chart that failed to load)."""
    note = {"text": words, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}
    return {"annotations": [{**note, "font": {"size": 14, "color": "#666"}}]}


def _lines(points: int) -> str:
    return "lines+markers" if points <= SPARSE else "lines"


def _time_axis(span: Span | None, **more: Any) -> dict[str, Any]:
    """A date axis, showing the whole ``span`` (start, end) when given, not just the data."""
    shown = {"range": [span[0].isoformat(), span[1].isoformat()]} if span else {}
    return {"type": "date", **shown, **more}


# --- GPU metrics over time ---------------------------------------------------------------


def _band_traces(series: Series, axis: str = "", legend: bool = True) -> list[dict[str, Any]]:
    """max (invisible), min filled up to max, and the mean line, on axes x{axis}/y{axis}."""
    times = [p.at.isoformat() for p in series.points]
    axes = {"xaxis": f"x{axis}", "yaxis": f"y{axis}"}
    edge = {"type": "scatter", "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    return [
        {**edge, **axes, "x": times, "y": [p.high for p in series.points], "name": "max"},
        {
            **edge,
            **axes,
            "x": times,
            "y": [p.low for p in series.points],
            "name": "min",
            "fill": "tonexty",
            "fillcolor": BAND_FILL,
        },
        {
            "type": "scatter",
            "mode": _lines(len(times)),
            "marker": {"size": 4},
            **axes,
            "x": times,
            "y": [p.mean for p in series.points],
            "name": "mean",
            "line": {"color": "#1f77b4"},
            "showlegend": legend,
        },
    ]


def band_figure(series: Series, title: str | None = None, span: Span | None = None) -> dict[str, Any]:
    """The mean as a line inside a shaded min-max band, one point per bucket; the time
    axis shows ``span`` (start, end) when given."""
    return _figure(
        _band_traces(series),
        title or TITLES.get(series.metric, series.metric),
        xaxis=_time_axis(span),
        yaxis={"title": {"text": UNITS.get(series.metric, "")}, "rangemode": "tozero"},
        meta={"resolution_seconds": series.resolution, "bucket_seconds": series.bucket_seconds},
        **({} if series.points else _no_data("No GPU samples in this range.")),
    )


def job_gpu_figure(metrics: Sequence[Series], span: Span | None = None) -> dict[str, Any]:
    """One band per metric (its GPUs' min, mean and max), stacked, sharing the time axis,
    which shows ``span`` (the job's start and end) when given."""
    rows = max(len(metrics), 1)
    gap = 0.06
    height = (1 - gap * (rows - 1)) / rows
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"height": 180 * rows + 80, "showlegend": False, "hovermode": "x"}
    for i, series in enumerate(metrics):
        axis = "" if i == 0 else str(i + 1)
        data += _band_traces(series, axis, legend=False)
        top = 1 - i * (height + gap)
        layout[f"xaxis{axis}"] = _time_axis(
            span, anchor=f"y{axis}", showticklabels=i == rows - 1, **({"matches": "x"} if axis else {})
        )
        layout[f"yaxis{axis}"] = {
            "domain": [max(top - height, 0), top],
            "title": {"text": f"{TITLES.get(series.metric, series.metric)} ({UNITS.get(series.metric, '')})"},
            "rangemode": "tozero",
            "anchor": f"x{axis}",
        }
    meta = [{"metric": s.metric, "resolution_seconds": s.resolution, "points": len(s.points)} for s in metrics]
    return _figure(data, "GPUs of this job (min, mean, max)", meta=meta, **layout)


# --- Cluster overview --------------------------------------------------------------------

#: A GPU's state in the allocation heatmap, in colour order.
GPU_STATES = ("free", "allocated", "allocated, idle", "unavailable")
GPU_COLORS = ("#e5ecf6", "#2ca02c", IDLE_COLOR, "#7f7f7f")
#: Up to this many nodes the heatmap runs them across; up to LABELLED_NODES it runs them
#: down, named; beyond, across without names (a name per cell would be unreadable).
ACROSS_NODES = 8
LABELLED_NODES = 64


class GpuCell(NamedTuple):
    """One GPU in the heatmap: where it is, what holds it, and how busy it was lately."""

    node: str
    index: int  # type: ignore[assignment]  # the GPU's index on its node, shadowing tuple.index()
    state: str  # one of GPU_STATES
    utilization: float | None = None  # recent mean, % (None: no recent samples)
    job: int | None = None
    account: str = ""
    parent: int | None = None  # a MIG slice's GPU (its index on the node); None for a whole GPU


#: A ``GpuCell``'s fields as a plain tuple, which is what a page builds for each of its
#: 8,000 GPUs: a plain tuple of plain values is cheaper to build and, unlike a named
#: tuple or a dataclass, the garbage collector stops tracking it (so the cells do not
#: bring on full collections). A ``GpuCell`` is one; ``GpuCell._make(row)`` names one.
CellRow = tuple[str, int, str, float | None, int | None, str, int | None]


def _cell_words(state: str, utilization: float | None, job: int | None, account: str) -> str:
    words = state if job is None else f"{state}, job {job} ({account})"
    return words if utilization is None else f"{words}, {utilization:.0f}% busy"


def _slice_places(cells: Sequence[CellRow]) -> dict[tuple[str, int], tuple[int, int]]:
    """(node, slice index) -> (its rank among its GPU's slices, how many slices that GPU has)."""
    siblings: dict[tuple[str, int], list[int]] = {}
    for node, index, _, _, _, _, parent in cells:
        if parent is not None:
            siblings.setdefault((node, parent), []).append(index)
    places: dict[tuple[str, int], tuple[int, int]] = {}
    for (node, _), indices in siblings.items():
        for rank, index in enumerate(sorted(indices)):
            places[(node, index)] = (rank, len(indices))
    return places


def allocation_heatmap(cells: Sequence[CellRow], nodes: Sequence[str]) -> dict[str, Any]:
    """Nodes across (in the given order), GPUs down; each cell coloured by its state (free,
    allocated, allocated but idle, unavailable); hover names job and utilization.

    The GPU axis is the GPU's position on its node. A GPU split into MIG slices is drawn
    as its slices side by side within its own row (a trace per slice count), so slice
    indices (numbered after the node's GPUs) never stretch the axis past the GPUs."""
    column = {name: i for i, name in enumerate(nodes)}
    places = _slice_places(cells)
    depth = max((index if parent is None else parent for _, index, _, _, _, _, parent in cells), default=-1) + 1
    parts = sorted({1} | {k for _, k in places.values()})
    z: dict[int, list[list[int | None]]] = {k: [[None] * len(nodes) for _ in range(depth * k)] for k in parts}
    text = {k: [[""] * len(nodes) for _ in range(depth * k)] for k in parts}
    code = {state: i for i, state in enumerate(GPU_STATES)}
    counts = dict.fromkeys(GPU_STATES, 0)
    for node, index, state, utilization, job, account, parent in cells:  # one pass: a cell per GPU
        counts[state] += 1
        x = column.get(node)
        if x is None:
            continue
        words = _cell_words(state, utilization, job, account)
        if parent is None:
            z[1][index][x] = code[state]
            text[1][index][x] = words
        else:
            rank, k = places[(node, index)]
            z[k][parent * k + rank][x] = code[state]
            text[k][parent * k + rank][x] = f"MIG slice {rank + 1} of {k} (GPU {index}): {words}"
    n = len(GPU_STATES)
    scale = [[edge / n, color] for i, color in enumerate(GPU_COLORS) for edge in (i, i + 1)]
    named = len(nodes) <= LABELLED_NODES
    # Up to a few nodes, nodes go across; more, and their names (across, they would run
    # over each other) go down the side, one row each, where they always fit.
    down = ACROSS_NODES < len(nodes) <= LABELLED_NODES
    traces = [
        _heatmap_trace(z[k], text[k], nodes, depth, k, down, named, scale, first=k == 1)
        for k in parts
        if k == 1 or any(v is not None for row in z[k] for v in row)
    ]
    nodes_axis = {"type": "category", "showticklabels": named, "automargin": True}
    gpus_axis = {"title": {"text": "GPU"}, "dtick": 1, "automargin": True, "zeroline": False, "showgrid": False}
    return _figure(
        traces,
        f"GPU allocation by node and GPU ({len(nodes)} nodes)",
        height=120 + 20 * len(nodes) if down else 160 + 22 * depth,
        xaxis={**gpus_axis, "range": [-0.5, depth - 0.5]} if down else nodes_axis,
        yaxis={**nodes_axis, "autorange": "reversed"} if down else {**gpus_axis, "range": [depth - 0.5, -0.5]},
        meta={"counts": counts, "nodes_down": down, "gpus_per_node": depth},
    )


def _heatmap_trace(
    z: list[list[int | None]],
    text: list[list[str]],
    nodes: Sequence[str],
    depth: int,
    parts: int,
    down: bool,
    named: bool,
    scale: list[list[Any]],
    *,
    first: bool,
) -> dict[str, Any]:
    """One heatmap of the cells split ``parts`` ways per GPU (1: whole GPUs): each GPU's
    row holds its ``parts`` slices at even steps, centred on the GPU's position."""
    gpus = (
        list(range(depth)) if parts == 1 else [p - 0.5 + (j + 0.5) / parts for p in range(depth) for j in range(parts)]
    )
    n = len(GPU_STATES)
    where = "%{y} GPU %{x}" if down else "%{x} GPU %{y}"
    return {
        "type": "heatmap",
        "x": gpus if down else list(nodes),
        "y": list(nodes) if down else gpus,
        "z": [list(row) for row in zip(*z, strict=True)] if down and z else z,
        "text": [list(row) for row in zip(*text, strict=True)] if down and text else text,
        "hovertemplate": (where if parts == 1 else "%{y}" if down else "%{x}") + ": %{text}<extra></extra>",
        "zmin": -0.5,
        "zmax": n - 0.5,
        "colorscale": scale,
        "showscale": first,
        "xgap": 1 if named else 0,
        "ygap": 1,
        "colorbar": {"tickvals": list(range(n)), "ticktext": list(GPU_STATES), "thickness": 12},
    }


def allocated_utilization_figure(cells: Sequence[CellRow], idle_below: float, window: str) -> dict[str, Any]:
    """How busy the allocated GPUs were over ``window``: a histogram in 10% steps whose
    idle bars (below ``idle_below`` %) are red, with the count of idle GPUs in the title.
    GPUs without recent samples are counted apart."""
    edges = list(range(0, 100, 10))
    counts = [0] * len(edges)
    allocated = known = idle = 0
    for _, _, state, u, _, _, _ in cells:  # one pass over every GPU: bars of 10%, 100% and over in the last
        if state not in ("allocated", "allocated, idle"):
            continue
        allocated += 1
        idle += state == "allocated, idle"
        if u is not None:
            known += 1
            if u >= 0:
                counts[min(int(u // 10), len(edges) - 1)] += 1
    trace = {
        "type": "bar",
        "x": [f"{lo}-{lo + 10}%" for lo in edges],
        "y": counts,
        "marker": {"color": [IDLE_COLOR if lo < idle_below else "#2ca02c" for lo in edges]},
        "hovertemplate": "%{y} GPUs at %{x}<extra></extra>",
    }
    unknown = allocated - known
    title = f"Allocated GPUs by utilization ({window}): {idle} of {allocated} idle"
    if unknown:
        title += f", {unknown} without samples"
    return _figure(
        [trace],
        title,
        xaxis={"title": {"text": "mean utilization"}, "type": "category"},
        yaxis={"title": {"text": "GPUs"}, "rangemode": "tozero"},
        meta={"allocated": allocated, "idle": idle, "without_samples": unknown},
        **({} if allocated else _no_data("No GPU is allocated now.")),
    )


#: A legend in rows across the bottom of the figure (``yref`` container: measured from
#: the figure's bottom edge, so it stays under the time axis's labels whatever the height).
QUEUE_LEGEND = {"orientation": "h", "x": 0, "xanchor": "left", "yref": "container", "y": 0, "yanchor": "bottom"}


@dataclass(frozen=True, slots=True)
class QueueRow:
    """An account's queue at one instant (or its mean over a bucket)."""

    at: datetime
    account: str
    pending: float
    running: float


#: What an empty queue chart says.
NO_QUEUE = "No job waited or ran in this range."


def queue_figure(rows: Sequence[QueueRow], span: Span | None = None) -> dict[str, Any]:
    """Pending (top) and running (bottom) jobs over time (the time axis shows ``span``
    when given), stacked by account. An account with no row at a sampled instant had no
    jobs then (zero)."""
    times = sorted({r.at for r in rows})
    accounts = sorted({r.account for r in rows})
    value = {(r.at, r.account): r for r in rows}
    data = []
    color = {account: PALETTE[i % len(PALETTE)] for i, account in enumerate(accounts)}
    for what, axis, group in (("pending", "", "pending"), ("running", "2", "running")):
        for account in accounts:
            cells = [value.get((t, account)) for t in times]
            data.append(
                {
                    "type": "scatter",
                    "mode": _lines(len(times)),
                    "stackgroup": group,
                    "name": account,
                    "legendgroup": account,
                    # The legend shows the pending traces only: the running ones must
                    # wear the same colour, not the palette's next ones.
                    "line": {"color": color[account]},
                    "fillcolor": color[account],
                    "showlegend": what == "pending",
                    "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}",
                    "x": [t.isoformat() for t in times],
                    "y": [getattr(c, what) if c else 0 for c in cells],
                    "hovertemplate": f"{account}: %{{y}} {what}<extra></extra>",
                }
            )
    title = "Queue by account: pending (top) and running jobs"
    if not accounts:  # one plain plot saying so: Plotly draws no axes of the second plot without a trace on them
        return _figure([], title, xaxis=_time_axis(span), yaxis={"title": {"text": "jobs"}}, **_no_data(NO_QUEUE))
    return _figure(
        data,
        title,
        height=460,
        # The accounts under the time axis, across: beside the plots they took a column
        # of their width, and Plotly placed them over the data when the chart was narrow.
        legend=QUEUE_LEGEND,
        margin={**MARGIN, "b": 100},
        xaxis=_time_axis(span, anchor="y", showticklabels=False, matches="x2"),
        yaxis={"domain": [0.55, 1], "title": {"text": "pending"}, "rangemode": "tozero"},
        xaxis2=_time_axis(span, anchor="y2"),
        yaxis2={"domain": [0, 0.45], "title": {"text": "running"}, "rangemode": "tozero"},
    )


@dataclass(frozen=True, slots=True)
class WaitBin:
    label: str  # "1-5 min"
    jobs: int


def wait_figure(bins: Sequence[WaitBin]) -> dict[str, Any]:
    """How long the jobs that started in the range waited, one bar per bin."""
    total = sum(b.jobs for b in bins)
    trace = {
        "type": "bar",
        "x": [b.label for b in bins],
        "y": [b.jobs for b in bins],
        "hovertemplate": "%{y} jobs waited %{x}<extra></extra>",
    }
    return _figure(
        [trace],
        f"Wait before start ({total} {'job' if total == 1 else 'jobs'} started in the range)",
        xaxis={"type": "category", "title": {"text": "waited"}},
        yaxis={"title": {"text": "jobs"}, "rangemode": "tozero"},
        **({} if total else _no_data("No job started in this range.")),
    )


def gpu_hours_figure(hours: Sequence[tuple[str, float]]) -> dict[str, Any]:
    """GPU-hours per account over the range, largest first."""
    ordered = sorted(hours, key=lambda pair: (-pair[1], pair[0]))
    trace = {
        "type": "bar",
        "x": [account for account, _ in ordered],
        "y": [round(value, 3) for _, value in ordered],
        "hovertemplate": "%{x}: %{y:.1f} GPU-hours<extra></extra>",
    }
    return _figure(
        [trace],
        "GPU-hours by account",
        xaxis={"type": "category"},
        yaxis={"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
        **({} if ordered else _no_data("No GPU time in this range.")),
    )


def usage_figure(
    starts: Sequence[datetime], series: dict[str, list[float]], group_by: str, bucket: str
) -> dict[str, Any]:
    """GPU-hours per period, one stacked bar segment per group (largest group lowest),
    each group its palette colour by name."""
    names = sorted(series, key=lambda name: (-sum(series[name]), name))
    x = [start.date().isoformat() for start in starts]
    traces = [
        {
            "type": "bar",
            "name": name or "-",
            "x": x,
            "y": [round(value, 3) for value in series[name]],
            "marker": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"{name or '-'}: %{{y:.1f}} GPU-hours<extra>%{{x}}</extra>",
        }
        for i, name in enumerate(names)
    ]
    return _figure(
        traces,
        f"GPU-hours per {bucket}, by {group_by.replace('_', ' ')}",
        barmode="stack",
        height=380,
        # Legend to the right (Plotly's default): below, it ran into the slanted dates.
        xaxis={"type": "category", "title": {"text": f"{bucket} starting"}, "automargin": True, "tickangle": -45},
        yaxis={"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
    )


def preview_figure(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A preview's mean wait per account, as the accounts are beside with the change:
    ``rows`` as a stored preview result has them (``account``, ``today`` and ``proposed``
    with ``avg_wait_s``)."""
    return _hours_side_by_side(
        [str(row["account"]) for row in rows],
        [
            ("as it is", [float(row["today"]["avg_wait_s"]) for row in rows]),
            ("with the change", [float(row["proposed"]["avg_wait_s"]) for row in rows]),
        ],
        "Mean wait per account on the replayed history",
    )


def replay_figure(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A replay's mean wait and mean job completion time per policy: ``rows`` as a stored
    replay result has them (``policy``, ``avg_wait_s``, ``avg_jct_s``)."""
    return _hours_side_by_side(
        [str(row["policy"]) for row in rows],
        [
            ("mean wait", [float(row["avg_wait_s"]) for row in rows]),
            ("mean completion time", [float(row["avg_jct_s"]) for row in rows]),
        ],
        "Mean wait and completion time per policy",
    )


def _hours_side_by_side(names: list[str], series: list[tuple[str, list[float]]], title: str) -> dict[str, Any]:
    """Grouped bars, one per series and name, of durations given in seconds, in hours."""
    traces = [
        {
            "type": "bar",
            "name": label,
            "x": names,
            "y": [round(seconds / 3600, 3) for seconds in values],
            "marker": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"{label}: %{{y:.2f}} h<extra>%{{x}}</extra>",
        }
        for i, (label, values) in enumerate(series)
    ]
    return _figure(
        traces,
        title,
        barmode="group",
        height=340,
        xaxis={"type": "category", "automargin": True},
        yaxis={"title": {"text": "hours"}, "rangemode": "tozero"},
    )


def fairshare_figure(rows: Sequence[ShareRow]) -> dict[str, Any]:
    """Per account (tree order, indented by depth): its normalised shares (the fraction of
    the machine it is entitled to) beside its normalised usage (the fraction it used)."""
    accounts = [r for r in rows if not r.user]
    labels = ["\u00a0\u00a0" * r.depth + r.account for r in accounts]
    bar = {"type": "bar", "orientation": "h", "y": labels}
    return _figure(
        [
            {**bar, "name": "normalised shares", "x": [r.norm_shares for r in accounts]},
            {**bar, "name": "normalised usage", "x": [r.norm_usage for r in accounts]},
        ],
        "Fair-share: entitled vs used (fraction of the machine)",
        barmode="group",
        height=120 + 40 * max(len(accounts), 1),
        xaxis={"rangemode": "tozero", "tickformat": ".0%"},
        yaxis={"autorange": "reversed", "type": "category"},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        margin={**MARGIN, "t": 70},
    )
