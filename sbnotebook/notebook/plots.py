"""Charts as plain functions returning plotly figures: usable with or without widgets.

Each takes what the settlement library produces (records, a peeked page, a locked batch, a
DataFrame in the record schema, count samples or a send Report).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ..core import EntityCounts, Report, to_dataframe

DEPTH_SERIES = (("active", "#1f77b4"), ("dead_letter", "#d62728"), ("scheduled", "#2ca02c"))


def records_frame(source: Any) -> pd.DataFrame:
    """A DataFrame in the record schema from records, a PeekPage, a LockedBatch or a DataFrame."""
    if isinstance(source, pd.DataFrame):
        return source
    if hasattr(source, "to_pandas"):
        return source.to_pandas()
    return to_dataframe(list(source))


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template="plotly_white", height=360)
    return fig


def depth_over_time(samples: Iterable[tuple[dt.datetime, EntityCounts]] | pd.DataFrame, entity: str = "") -> go.Figure:
    """Active, dead-letter and scheduled counts over time, from (time, EntityCounts) samples."""
    if isinstance(samples, pd.DataFrame):
        frame = samples
    else:
        frame = pd.DataFrame(
            [
                {"time": t, "active": c.active, "dead_letter": c.dead_letter, "scheduled": c.scheduled}
                for t, c in samples
            ]
        )
    fig = go.Figure()
    for name, colour in DEPTH_SERIES:
        if name in frame:
            fig.add_trace(
                go.Scatter(
                    x=frame["time"], y=frame[name], name=name.replace("_", "-"), mode="lines+markers", line_color=colour
                )
            )
    return _layout(fig, f"Depth of {entity}".strip() if entity else "Entity depth", "time", "messages")


def message_age(source: Any, *, now: dt.datetime | None = None, bins: int = 30) -> go.Figure:
    """How long the messages have waited since they were enqueued, in seconds."""
    frame = records_frame(source)
    now = now or dt.datetime.now(dt.UTC)
    ages = (pd.Timestamp(now) - frame["enqueued_time"]).dt.total_seconds() if len(frame) else pd.Series([], dtype=float)
    fig = go.Figure(go.Histogram(x=ages, nbinsx=bins, name="age", marker_color="#1f77b4"))
    oldest = f" (oldest {ages.max():.0f} s)" if len(ages) else ""
    return _layout(fig, f"Message age{oldest}", "seconds since enqueued", "messages")


def delivery_counts(source: Any) -> go.Figure:
    """How many times messages have been delivered: high counts point at poison messages."""
    frame = records_frame(source)
    counted = frame["delivery_count"].dropna().astype(int).value_counts().sort_index()
    fig = go.Figure(go.Bar(x=counted.index.tolist(), y=counted.tolist(), marker_color="#ff7f0e"))
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Delivery counts", "delivery count", "messages")


def reason_counts(source: Any) -> pd.DataFrame:
    """Dead-letter reasons with how many messages each and their oldest and newest enqueue times."""
    frame = records_frame(source)
    if not len(frame):
        return pd.DataFrame(columns=["dead_letter_reason", "messages", "oldest", "newest", "example_description"])
    keyed = frame.assign(dead_letter_reason=frame["dead_letter_reason"].fillna("(none)"))
    grouped = keyed.groupby("dead_letter_reason", sort=False)
    table = grouped.agg(
        messages=("sequence_number", "size"),
        oldest=("enqueued_time", "min"),
        newest=("enqueued_time", "max"),
        example_description=("dead_letter_error_description", "first"),
    )
    return table.sort_values("messages", ascending=False).reset_index()


def dead_letter_reasons(source: Any) -> go.Figure:
    """Dead-lettered messages by reason, most frequent first."""
    table = reason_counts(source)
    fig = go.Figure(
        go.Bar(
            x=table["messages"].tolist(),
            y=table["dead_letter_reason"].tolist(),
            orientation="h",
            marker_color="#d62728",
        )
    )
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Dead-letter reasons", "messages", "reason")


def send_latency(report: Report) -> go.Figure:
    """Latency per send operation (ms) from a send Report, with its summary in the title."""
    ms = [s * 1000 for s in report.stats.get("latencies", [])]
    fig = go.Figure(go.Histogram(x=ms, nbinsx=30, marker_color="#9467bd", name="latency"))
    operations = report.stats.get("operations", len(ms))
    title = f"{report.summary()}, {report.rate:.0f} msg/s over {operations} operations"
    return _layout(fig, title, "latency per operation (ms)", "operations")


def send_throughput(reports: Mapping[str, Report | float]) -> go.Figure:
    """Messages per second for several ways of sending the same data, side by side
    (a send Report, or a plain rate for a baseline measured some other way)."""
    names = list(reports)
    rates = [r.rate if isinstance(r, Report) else float(r) for r in reports.values()]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=rates,
            text=[f"{r:.0f}/s" for r in rates],
            textposition="outside",
            marker_color="#17becf",
        )
    )
    return _layout(fig, "Send throughput", "", "messages per second")


def journey_timeline(journey: Any) -> go.Figure:
    """A message's journey (``core.journey``) as a timeline: one marker per event, a row per entity
    it was in, the delivery count above each delivery."""
    frame = journey.to_pandas()
    fig = go.Figure()
    timed = frame[frame["time"].notna()]
    for event, rows in timed.groupby("event", sort=False):
        shown = rows[["delivery_count", "message_id", "reason", "to"]].astype("object")
        shown = shown.where(shown.notna(), "")
        fig.add_trace(
            go.Scatter(
                x=rows["time"],
                y=rows["entity"],
                mode="markers+text",
                name=str(event),
                text=[str(c) for c in shown["delivery_count"]],
                textposition="top center",
                customdata=shown[["message_id", "reason", "to"]].values,
                hovertemplate=(
                    f"{event}<br>%{{x}}<br>message %{{customdata[0]}}<br>%{{customdata[1]}} %{{customdata[2]}}"
                    "<extra></extra>"
                ),
            )
        )
    return _layout(fig, f"Journey in {journey.entity}", "time", "entity")
