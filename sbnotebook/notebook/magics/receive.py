"""%sb_receive and %sb_settle: lock a batch (or receive-and-delete) and settle its rows."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from ..cells import parse_rows
from .command import COUNT, Reported, command, parser, seconds
from .targets import batch_address, sequence_numbers, shown, with_dlq

if TYPE_CHECKING:
    from .state import MagicsState

RECEIVE = parser(
    "sb_receive",
    "Receive messages. peek-lock (default) returns a locked batch to settle with %sb_settle or its methods;\n"
    "its locks are renewed while you work. receive-and-delete removes the messages at once (asks first).",
    "  batch = %sb_receive orders -n 20\n"
    "  batch.complete([0, 1]); batch.dead_letter([2], reason='bad-total')\n"
    "  %sb_receive orders --mode receive-and-delete --yes\n"
    "  %sb_receive orders --sequence-numbers 41,42      # fetch deferred messages by sequence number",
)
RECEIVE.add_argument("entity")
RECEIVE.add_argument(
    "-n",
    "--max-messages",
    type=COUNT,
    dest="max_messages",
    help="at most this many (default: SbMagics.receive_max_messages)",
)
RECEIVE.add_argument("--mode", choices=["peek-lock", "receive-and-delete"], default="peek-lock")
RECEIVE.add_argument(
    "--wait-seconds",
    type=seconds(zero=True),
    help="seconds to wait for the first message (0: take what is there; default: SbMagics.wait_seconds)",
)
RECEIVE.add_argument("--dlq", action="store_true", help="receive from the dead-letter queue")
RECEIVE.add_argument("--session-id", help="receive from one session")
RECEIVE.add_argument(
    "--sequence-numbers",
    metavar="N,...",
    help="fetch these deferred messages (only a deferred message is received by its sequence number)",
)
RECEIVE.add_argument("--yes", action="store_true", help="do not ask before receive-and-delete")
RECEIVE.add_argument("--panel", action="store_true", help="show the settlement panel for the batch")
RECEIVE.rename("--wait", "--wait-seconds")
RECEIVE.rename("--session", "--session-id")
RECEIVE.rename("--deferred", "--sequence-numbers")  # --deferred is a kind of message (%sb_purge --deferred)

SETTLE = parser(
    "sb_settle",
    "Settle rows of a locked batch (the last one received, or --batch NAME).",
    "  %sb_settle complete 0,1,4-6\n"
    "  %sb_settle dead-letter 2 --reason bad-total --description 'total < 0'\n"
    "  %sb_settle abandon all\n"
    "  %sb_settle defer 3 --batch batch\n"
    "  %sb_settle renew",
)
SETTLE.add_argument("action", choices=["complete", "abandon", "dead-letter", "defer", "renew", "close"])
SETTLE.add_argument("rows", nargs="?", help="row numbers and ranges (0,2,5-7) or 'all'")
SETTLE.add_argument("--batch", help="name of a variable holding a locked batch")
SETTLE.add_argument("--reason", help="dead-letter reason")
SETTLE.add_argument("--description", help="dead-letter error description")
SETTLE.add_argument("--yes", action="store_true", help="do not ask before settling every row")


@command(RECEIVE)
def sb_receive(self: MagicsState, args: argparse.Namespace) -> Any:
    entity = with_dlq(args.entity, args.dlq)
    count = args.max_messages if args.max_messages is not None else self.receive_max_messages
    common: dict[str, Any] = {
        "max_in_flight": self.max_in_flight,
        "max_renewal_seconds": self.max_renewal_seconds,
        "connection": self.conn(),
    }
    if args.sequence_numbers:
        seqs = sequence_numbers(args.sequence_numbers)
        batch = core.receive_deferred(entity, seqs, **common)
    else:
        if args.mode == "receive-and-delete" and not args.yes:
            where = shown(self, entity)
            self.ask(f"receive-and-delete removes up to {count} messages from {where} for good.", "delete")
        batch = core.receive(
            entity,
            max_messages=count,
            mode=args.mode.replace("-", "_"),  # typed kebab-case, as %sb_settle dead-letter; snake in Python
            wait_seconds=self.wait_seconds if args.wait_seconds is None else args.wait_seconds,
            session_id=args.session_id,
            **common,
        )
    batch.label = shown(self, entity)  # prod:orders in its repr and reports, as in every other line
    self.batches.append(batch)
    if len(batch) == 0:
        print(f"No messages arrived from {shown(self, entity)}.")
    elif batch.mode == "peek_lock":
        left = [s for s in batch.seconds_left() if s is not None]
        print(
            f"{len(batch)} messages locked from {shown(self, entity)} (locks {min(left):.0f} s, renewed for up to "
            f"{self.max_renewal_seconds:.0f} s). Settle with %sb_settle or the batch's methods."
        )
    else:
        print(f"{len(batch)} messages received and deleted from {shown(self, entity)}.")
    if args.panel and len(batch):
        from ..widgets import SettlementPanel

        return SettlementPanel(batch)
    return batch


@command(SETTLE)
def sb_settle(self: MagicsState, args: argparse.Namespace) -> Any:
    batch = self.batch(args.batch)
    where = batch_address(self, batch)  # prod:orders for a batch of a named connection
    if args.action == "close":
        held = len(batch.unsettled)
        batch.close()
        print(f"Closed: {held} unsettled locks given back." if held else "Closed.")
        return None
    if args.action == "renew":
        report = batch.renew()
    else:
        if args.rows is None:
            raise UsageError(f"Say which rows to {args.action}: row numbers (0,2,5-7) or 'all'.")
        rows = parse_rows(args.rows, len(batch))
        if rows is None and len(batch.unsettled) > 1 and not args.yes and args.action != "abandon":
            self.ask(f"{args.action} all {len(batch.unsettled)} unsettled messages of {where}?", "yes")
        if rows is None:  # 'all': every row not settled yet, lost locks included (they report as lost)
            rows = [i for i in range(len(batch)) if batch.status(i) in ("locked", "lock_lost")]
            if not rows:
                print(f"Every row of this batch of {where} is settled already; nothing to {args.action}.")
                return batch.to_pandas()
        if args.action == "dead-letter":
            report = batch.dead_letter(rows, reason=args.reason, description=args.description)
        else:
            report = getattr(batch, args.action)(rows)
    report.entity = where
    print(report.summary())
    return Reported(report, report.to_pandas())  # not ok (a lost lock): fails the cell (command.finished)
