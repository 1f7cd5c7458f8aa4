"""%sb_stats: counts over time and message age, as a plotly figure."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import EntityPath
from .. import plots
from .command import COUNT, command, parser, seconds
from .targets import shown

if TYPE_CHECKING:
    from .state import MagicsState

AGE_SAMPLE = 4 * core.PAGE_SIZE  # messages peeked for their age by default: four peeks (1000)

STATS = parser(
    "sb_stats",
    "Counts over time (each call adds a sample; --samples takes several) and message age, as a plotly figure.",
    "  %sb_stats orders\n  %sb_stats orders --samples 10 --interval 2\n  fig = %sb_stats orders --reset",
)
STATS.add_argument("entity")
STATS.add_argument("--samples", type=COUNT, default=1, help="how many count samples to take now")
STATS.add_argument("--interval", type=seconds(zero=True), default=1.0, help="seconds between samples")
STATS.add_argument(
    "-n", "--max-messages", type=COUNT, default=AGE_SAMPLE, help="at most this many messages peeked for their age"
)
STATS.add_argument("--reset", action="store_true", help="forget earlier samples of this entity")


@command(STATS)
def sb_stats(self: MagicsState, args: argparse.Namespace) -> Any:
    path = str(EntityPath.parse(args.entity))
    history = self.samples.setdefault(shown(self, path), [])  # prod:q's samples are not q's
    if args.reset:
        history.clear()
    for i in range(args.samples):
        if i:
            time.sleep(args.interval)
        history.append((dt.datetime.now(dt.UTC), core.counts(path, connection=self.conn())))
    page = core.peek(path, max_messages=args.max_messages, connection=self.conn())
    return stats_figure(shown(self, path), history, page.records)


def stats_figure(entity: str, history: list[tuple[dt.datetime, core.EntityCounts]], records: list[Any]) -> Any:
    from plotly.subplots import make_subplots

    depth = plots.depth_over_time(history, entity)
    age = plots.message_age(records)
    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"Depth of {entity}", age.layout.title.text))
    for trace in depth.data:
        fig.add_trace(trace, row=1, col=1)
    for trace in age.data:
        fig.add_trace(trace, row=1, col=2)
    fig.update_xaxes(title_text="time", row=1, col=1)
    fig.update_xaxes(title_text="seconds since enqueued", row=1, col=2)
    fig.update_yaxes(title_text="messages", row=1, col=1)
    fig.update_layout(template="plotly_white", height=380)
    return fig
