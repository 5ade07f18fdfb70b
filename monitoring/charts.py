"""Chart builders, pure: plain data in, a Plotly figure as a dict out.

The page passes the dict to ``Plotly.newPlot`` (plotly.js from the installed ``plotly``
package's own bundle, never a CDN), and tests read the dict without a browser.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from monitoring.series import Series

UNITS = {"utilization": "%", "memory_used": "MiB", "temperature": "°C", "power": "W"}
TITLES = {"utilization": "GPU utilization", "memory_used": "GPU memory used", "temperature": "Temperature"}


def band_figure(series: Series, title: str | None = None) -> dict[str, Any]:
    """The mean as a line inside a shaded min-max band, one point per bucket."""
    times = [p.at.isoformat() for p in series.points]
    unit = UNITS.get(series.metric, "")
    band = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    figure = go.Figure(
        data=[
            go.Scatter(x=times, y=[p.high for p in series.points], name="max", **band),
            go.Scatter(
                x=times,
                y=[p.low for p in series.points],
                name="min",
                fill="tonexty",
                fillcolor="rgba(31, 119, 180, 0.2)",
                **band,
            ),
            go.Scatter(x=times, y=[p.mean for p in series.points], name="mean", mode="lines"),
        ],
        layout=go.Layout(
            title={"text": title or TITLES.get(series.metric, series.metric)},
            xaxis={"type": "date"},
            yaxis={"title": {"text": unit}, "rangemode": "tozero"},
            margin={"l": 50, "r": 20, "t": 40, "b": 40},
            meta={"resolution_seconds": series.resolution, "bucket_seconds": series.bucket_seconds},
        ),
    )
    return figure.to_plotly_json()
