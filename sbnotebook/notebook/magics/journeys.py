"""%sb_trace: one message's journey (``core.journey``), as a DataFrame and a plotly timeline."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from IPython.display import display

from ... import core
from .. import plots
from .command import command, parser, whole

if TYPE_CHECKING:
    from .state import MagicsState

TRACE = parser(
    "sb_trace",
    "One message's journey, oldest first: each delivery with its delivery count and lock, lock expiries, "
    "settlements, dead-lettering and why, forwarding, and the kit's copies of it. On the embedded emulator "
    "the broker's own record; on Azure what the message carries. Shows a timeline; returns a DataFrame.",
    "  %sb_trace orders --message-id order-17\n"
    f"  %sb_trace orders/{core.DEAD_LETTER_QUEUE} --sequence-number 42\n"
    "  df = %sb_trace orders --trace-id 4bf92f3577b34da6a3ce929d0e0e4736",
)
TRACE.add_argument("entity", help="queue, topic or topic/subscriptions/name (its dead-letter queue included)")
which = TRACE.add_mutually_exclusive_group(required=True)
which.add_argument("--message-id", help="the message's id")
which.add_argument("--sequence-number", type=whole(0), help="its sequence number in the entity")
which.add_argument("--trace-id", help="the trace id of the context it carries (32 hexadecimal digits)")


@command(TRACE)
def sb_trace(self: MagicsState, args: argparse.Namespace) -> Any:
    found = core.journey(
        args.entity,
        message_id=args.message_id,
        sequence_number=args.sequence_number,
        trace_id=args.trace_id,
        connection=self.conn(),
    )
    for note in found.notes:
        print(note)
    frame = found.to_pandas()
    if found.rows:
        fig = plots.journey_timeline(found)
        frame.attrs["timeline"] = fig  # the figure itself, for fig.show() where the bundle is not drawn
        display(_bundle(fig, len(found.rows)), raw=True)
    return frame


def _bundle(fig: Any, events: int) -> dict[str, Any]:
    """The figure as plotly's own mimetype (drawn by Jupyter's plotly renderer) with a line of text
    for a terminal: displaying the figure itself opens a browser outside a notebook."""
    import plotly.io as pio

    return {
        "application/vnd.plotly.v1+json": json.loads(pio.to_json(fig, validate=False)),
        "text/plain": f"<the journey's timeline: {events} events; df.attrs['timeline'] is the figure>",
    }
