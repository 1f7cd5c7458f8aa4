"""%sb_purge and %sb_cancel_scheduled: count first, confirm, then remove with a progress bar."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from ..purging import plan_purge, scheduled_to_cancel
from .command import command, parser
from .progress import Progress
from .targets import relabel, shown
from .times import add_window, window_of

if TYPE_CHECKING:
    from .state import MagicsState

PURGE = parser(
    "sb_purge",
    "Remove messages for good: active ones (the default), deferred, scheduled, dead-lettered, or all.\n"
    "Counts them first and asks (type 'purge'), unless --yes. One Report per entity purged.\n"
    "A key without the Manage right: counted by peeking instead, and the question and Reports say so.",
    "  %sb_purge orders                        # active messages\n"
    "  %sb_purge orders --dlq                  # the dead-letter queue\n"
    "  %sb_purge orders --deferred --scheduled # deferred and scheduled ones only\n"
    "  %sb_purge orders --all --yes            # everything, DLQ included, without asking\n"
    "  %sb_purge carts --deferred --session-ids c-7 # one session of a session-enabled queue\n"
    "  %sb_purge orders --panel                # buttons, with the same counted confirmation\n"
    "  %sb_purge orders --enqueued-before 2026-11-25T14:00  # test messages sent before the fix: batch delete\n"
    "  %sb_purge orders --dlq --enqueued-after 2h           # the last two hours' dead letters only",
)
PURGE.add_argument("entity", help="queue or topic/subscriptions/name")
PURGE.add_argument("--active", action="store_true", help="active messages (the default when nothing is named)")
PURGE.add_argument("--dlq", action="store_true", help="the dead-letter queue")
PURGE.add_argument("--deferred", action="store_true", help="deferred messages")
PURGE.add_argument("--scheduled", action="store_true", help="scheduled messages (queues)")
PURGE.add_argument("--all", action="store_true", help="active, deferred, scheduled and dead-lettered")
PURGE.add_argument(
    "--session-ids",
    metavar="ID[,ID...]",
    help="session-enabled entities: only these sessions (needed for a session holding nothing but deferred"
    " or scheduled messages, which Service Bus does not list)",
)
add_window(PURGE)
PURGE.add_argument("--yes", action="store_true", help="do not ask first")
PURGE.add_argument("--panel", action="store_true", help="the purge panel (purge and cancel-scheduled buttons)")
PURGE.rename("--session", "--session-ids")

CANCEL = parser(
    "sb_cancel_scheduled",
    "Cancel scheduled messages of a queue or topic by sequence number, or all of a queue's.\n"
    "Counts them first and asks (type 'cancel'), unless --yes.",
    "  %sb_cancel_scheduled orders 41,42,50-60\n  %sb_cancel_scheduled orders all --yes",
)
CANCEL.add_argument("entity", help="queue or topic")
CANCEL.add_argument("which", help="'all' (queues: found by peeking) or sequence numbers and ranges: 41,42,50-60")
CANCEL.add_argument("--yes", action="store_true", help="do not ask first")


@command(PURGE)
def sb_purge(self: MagicsState, args: argparse.Namespace) -> Any:
    window = window_of(args)
    if args.panel:
        if window is not None:
            raise UsageError("%sb_purge --panel purges whole kinds: give the window without --panel.")
        from ..widgets.purge import PurgePanel

        return PurgePanel(args.entity, connection=self.conn())
    named = [k for k in ("active", "deferred", "scheduled", "dlq") if getattr(args, k)]
    kinds = ("active", "deferred", "scheduled", "dlq") if args.all else tuple(named) or ("active",)
    sessions = tuple(s.strip() for s in args.session_ids.split(",")) if args.session_ids is not None else None
    if sessions is not None and args.all:
        kinds = ("active", "deferred", "scheduled")  # a session has no dead-letter queue of its own
    plan = plan_purge(args.entity, kinds, sessions=sessions, connection=self.conn(), window=window)
    if plan.total == 0:
        print(f"Nothing to purge: {relabel(self, plan.describe(), plan.entity)}")
        return None
    print(relabel(self, plan.describe(), plan.entity))
    if not args.yes:
        self.ask(f"This removes {plan.total} messages from {shown(self, plan.entity)} for good.", "purge")
    progress = Progress(shown(self, plan.entity), "Purging", "purged", total=plan.total)
    reports = plan.run(progress.update, connection=self.conn())
    for report in reports:
        progress.finish(report)
        progress.handle = None  # the next report gets its own line
    return reports[0] if len(reports) == 1 else reports


@command(CANCEL)
def sb_cancel_scheduled(self: MagicsState, args: argparse.Namespace) -> Any:
    numbers = scheduled_to_cancel(args.entity, args.which, connection=self.conn())
    if not numbers:
        print(f"No scheduled messages in {shown(self, args.entity)}.")
        return None
    listed = ", ".join(map(str, numbers[:10])) + (", ..." if len(numbers) > 10 else "")
    print(f"Cancel {len(numbers)} scheduled message(s) of {shown(self, args.entity)}: {listed}.")
    if not args.yes:
        self.ask("Cancelled messages are removed for good.", "cancel")
    progress = Progress(shown(self, args.entity), "Cancelling in", "cancelled", total=len(numbers))
    report = core.cancel_scheduled(args.entity, numbers, progress=progress.update, connection=self.conn())
    progress.finish(report)
    return report
