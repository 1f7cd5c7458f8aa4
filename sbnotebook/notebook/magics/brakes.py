"""The brake and the canary of the commands that move messages (%sb_resubmit, %sb_copy): their
options, the core keywords they give as typed, and what follows a canary: its fate said, then asked."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from ... import core
from ...core import CANARY_TIMEOUT, WATCH_INTERVAL, Report
from .command import COUNT, Declined, Parser, whole

if TYPE_CHECKING:
    from .state import MagicsState


def add_brake(parser: Parser, move: str) -> None:
    """The brake and the canary (core.resubmit's and core.copy's keywords, typed as they are) on
    ``parser``, whose command ``move``s messages (move, copy)."""
    parser.add_argument(
        "--stop-if-dead-letters",
        type=whole(0),
        metavar="N",
        help="stop once N more are in the watched dead-letter queues",
    )
    parser.add_argument("--stop-if-active", type=whole(0), metavar="N", help="stop once a watched backlog passes N")
    parser.add_argument(
        "--watch",
        metavar="ENTITY",
        action="append",
        help="what the brake watches (default: the target; a topic: its subscriptions)",
    )
    parser.add_argument("--canary", type=COUNT, metavar="K", help=f"{move} K first, say their fate, then ask")
    parser.add_argument(
        "--canary-timeout",
        type=float,
        metavar="SECONDS",
        default=CANARY_TIMEOUT,
        help="how long the canary waits at most for its K to be taken",
    )
    parser.add_argument(
        "--watch-interval",
        type=float,
        metavar="SECONDS",
        default=WATCH_INTERVAL,
        help="seconds between two readings",
    )


def brake_of(args: argparse.Namespace) -> core.Brake | None:
    """The line's brake, built once from its options (None: no --stop-if-* and no --watch; --watch
    alone is refused by ``core.Brake``)."""
    if args.stop_if_dead_letters is None and args.stop_if_active is None and not args.watch:
        return None
    return core.Brake(args.stop_if_dead_letters, args.stop_if_active, args.watch or (), args.watch_interval)


def canary_of(args: argparse.Namespace, count: int | None) -> core.Canary | None:
    """The line's canary of ``count`` (the line's --canary, or less: what is left to move), or None."""
    return None if count is None else core.Canary(count, args.canary_timeout)


def say_braked(report: Report, *, verb: str, again: str, after: str = "") -> None:
    """The one line a command the brake stopped says: what it moved (copied), what came back,
    and the line that goes on (``again``: the command as typed, without its canary)."""
    if core.braked(report):
        done = f"{report.count('sent')} copied" if verb == "copy" else f"{report.count('resubmitted')} moved"
        came_back = report.stats.get("came_back", 0)
        print(f"Stopped by the brake: {done}, {came_back} came back{after}. To go on: %{again}")


def without_canary(typed: str) -> str:
    """The line as typed without its ``--canary K``: the line that goes on after a canary."""
    return re.sub(r"\s--canary(?:=|\s+)\S+", "", f" {typed}").strip()


def canary_goes_on(self: MagicsState, report: Report, left: int, *, target: str, verb: str, again: str) -> bool:
    """After a canary: its fate (``report.stats["canary"]``) said, and asked whether the other
    ``left`` go (typed: the command's ``verb``, resubmit or copy). Not told to go on (or nobody to
    ask): nothing more moves, and the line that goes on (``again``) is said."""
    fate = core.CanaryFate.of(report)
    if fate is None:  # ended before its fate was read (interrupted): nothing more moves
        return False
    try:
        self.ask(
            f"The canary's {fate.moved} at {target}: {fate.settled} settled, {fate.dead_lettered} "
            f"dead-lettered, {fate.waiting} not yet taken. {'Copy' if verb == 'copy' else 'Move'} the other {left}?",
            verb,
        )
    except Declined:  # the canary's Report stands, nothing more moved
        print(f"Nothing more {'copied' if verb == 'copy' else 'moved'}. To go on: %{again}")
        return False
    return True
