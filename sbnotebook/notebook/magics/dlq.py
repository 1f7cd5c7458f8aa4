"""%sb_dlq: dead-letter triage (the panel, or a summary by reason)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import EntityPath, LiveConnection
from .. import plots
from .command import command, parser
from .targets import with_dlq

if TYPE_CHECKING:
    from .state import MagicsState

DLQ = parser(
    "sb_dlq",
    "Triage a dead-letter queue: the triage panel with widgets, else a summary by dead-letter reason.",
    "  %sb_dlq orders\n  %sb_dlq events/subscriptions/audit --summary",
)
DLQ.add_argument("entity", help="the entity whose dead-letter queue to look at")
DLQ.add_argument("--summary", action="store_true", help="the summary table, not the panel")
DLQ.add_argument("-n", type=int, dest="count", default=1000, help="how many dead-lettered messages to read")


@command(DLQ)
def sb_dlq(self: MagicsState, args: argparse.Namespace) -> Any:
    path = EntityPath.parse(args.entity).parent
    if not args.summary:
        panel = triage_panel(str(path), self.conn())
        if panel is not None:
            return panel
    page = core.peek(with_dlq(str(path), True), count=args.count, connection=self.conn())
    table = plots.reason_counts(page.records)
    print(f"{len(page)} dead-lettered messages in {path} by reason.")
    return table


def triage_panel(entity: str, connection: LiveConnection) -> Any:
    """The dead-letter triage panel when ipywidgets is there; None otherwise (the summary is shown)."""
    try:
        from ..widgets import TriagePanel
    except ImportError:
        return None
    return TriagePanel(entity, connection=connection)
