"""%sb_playbook: a playbook's plan (one scan of each dead-letter queue, nothing touched) and, with
--run, the run: asked first, as %sb_resubmit asks, then ``core.playbook.run`` (docs/playbooks.md).

The playbook's ``connection:`` is a named connection of this notebook (``%sb_connect --as NAME``), a
secret reference (``env:NAME``, ``secret:SCOPE/KEY``) or omitted (the notebook's connection). A run
the brake, a canary or an interrupt stopped, or one with failures, fails its cell with its last line
(what happened, in counts from the broker, and the line that goes on: ``--resume``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from .command import CommandFailed, command, parser

if TYPE_CHECKING:
    from .state import MagicsState

PLAYBOOK = parser(
    "sb_playbook",
    "Show what a playbook would do now (its plan: one scan of each dead-letter queue it names, nothing\n"
    "locked or counted); with --run, run it (asks first unless --yes): each rule through resubmit or\n"
    "discard, every message audited. Stopped by a brake, a canary or an interrupt: --resume goes on.",
    "  %sb_playbook incidents/orders.yaml              # the plan\n"
    "  %sb_playbook incidents/orders.yaml --run        # asks, then runs\n"
    "  %sb_playbook incidents/orders.yaml --run --yes  # a job: nobody to ask\n"
    "  %sb_playbook incidents/orders.yaml --run --resume --yes",
)
PLAYBOOK.add_argument("file", help="the playbook (YAML)")
PLAYBOOK.add_argument("--run", action="store_true", help="run it (without: the plan only)")
PLAYBOOK.add_argument("--resume", action="store_true", help="with --run: go on with a run that did not finish")
PLAYBOOK.add_argument("--yes", action="store_true", help="with --run: do not ask first")


def _connection(self: MagicsState, book: core.playbook.Playbook) -> Any:
    """The playbook's named connection, when it names one of this notebook's; else the notebook's
    (``None`` lets the playbook read its own secret reference)."""
    named = book.connection
    if named is None:
        return self.conn()
    if core.is_secret_ref(named):
        return None
    return self.named(named)


@command(PLAYBOOK)
def sb_playbook(self: MagicsState, args: argparse.Namespace) -> Any:
    book = core.playbook.load(args.file)
    conn = _connection(self, book)
    planned = core.playbook.plan(book, connection=conn)
    for line in planned.lines():
        print(line)
    if not args.run:
        return planned
    moves = sum(n for rule, n in planned.by_rule().items() if rule in {r.name for r in book.rules if r.do != "keep"})
    if not args.yes:
        self.ask(
            f"Run playbook {book.name}: {moves:,} message(s) resubmitted, parked or discarded as planned above "
            f"(copy first, complete second; the audit in {book.audit}).",
            "run",
        )
    done = core.playbook.run(book, resume=args.resume, connection=conn, progress=print)
    print(f"Audit: {done.audit_file}")
    print(done.summary())
    if done.exit_code != core.playbook.DONE_EXIT:  # failed or stopped: Run All and a job stop here
        raise CommandFailed(f"sb_playbook: {done.summary()}")
    return done
