"""%sb_resubmit: move dead-lettered messages back (copy first, complete second), optionally edited:
a body merge patch and property edits, previewed as a diff before anything moves."""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from ...core import EntityPath, TimeWindow, default_target, duration
from ..edits import MessageEdit, diff, parse_property
from .brakes import add_brake, brake_of, canary_goes_on, canary_of, say_braked, without_canary
from .command import COUNT, add_rate, command, parser, whole
from .progress import Progress, say_interrupted
from .route import show_fan_out
from .targets import label_report
from .targets import shown as named
from .times import add_window, records, said, unevaluated, window_of, within

if TYPE_CHECKING:
    from .state import MagicsState

RESUBMIT = parser(
    "sb_resubmit",
    "Resubmit dead-lettered messages of ENTITY (copy first, complete second), all or those --where\n"
    "selects, optionally edited. Shows how many and a diff of the first ones, then asks (type\n"
    "'resubmit') unless --yes. The edit is used for this command only.",
    "  %sb_resubmit orders\n"
    "  %sb_resubmit orders --where 'dead_letter_reason == \"bad-total\"' --patch '{\"total\": 0}'\n"
    "  %sb_resubmit orders --prop retried=yes --prop priority:=3 --remove-prop debug --subject order\n"
    "  %sb_resubmit orders --ttl 1h --to-session-id s-1 --max-messages 10 --yes\n"
    "  %sb_resubmit events/subscriptions/audit --target audit-retry\n"
    "  %sb_resubmit orders --enqueued-after 2026-11-25T14:00 --enqueued-before 2026-11-25T15:00  # the outage\n"
    "  %sb_resubmit orders --rate 50/s        # at most 50 messages a second (also /m)\n"
    "  %sb_resubmit orders --rate 50/s --stop-if-dead-letters 20   # stops if 20 come back dead-lettered\n"
    "  %sb_resubmit orders --resume --yes     # interrupted: the rest, nothing moved twice",
)
RESUBMIT.add_argument("entity", help="the entity whose dead-letter queue to resubmit from (or the DLQ's path)")
RESUBMIT.add_argument("--where", help="only messages matching this search expression")
RESUBMIT.add_argument("--target", help="where the copies go (default: the queue itself; required for subscriptions)")
RESUBMIT.add_argument("--patch", metavar="JSON", help="a JSON merge patch for JSON bodies")
RESUBMIT.add_argument(
    "--prop", metavar="NAME=VALUE", action="append", default=[], help="set a property (NAME:=JSON for a typed value)"
)
RESUBMIT.add_argument("--remove-prop", metavar="NAME", action="append", default=[], help="remove a property")
RESUBMIT.add_argument("--subject", help="set the subject")
RESUBMIT.add_argument("--ttl", metavar="D", help="set the time to live (30m, 1d)")
RESUBMIT.add_argument("--to-session-id", help="set the copies' session id")
RESUBMIT.add_argument("-n", "--max-messages", type=COUNT, help="at most this many messages")
add_window(RESUBMIT)
RESUBMIT.add_argument(
    "--keep-message-id", action="store_true", help="keep the message ids (duplicate detection may drop)"
)
RESUBMIT.add_argument("--allow-fan-out", action="store_true", help="allow the topic as target (every subscription)")
RESUBMIT.add_argument("--max-in-flight", type=COUNT, dest="max_in_flight", help="default: SbMagics.max_in_flight")
add_rate(RESUBMIT)
add_brake(RESUBMIT, "move")
RESUBMIT.add_argument(
    "--resume", action="store_true", help="continue the resubmit that was interrupted (nothing moved twice)"
)
RESUBMIT.add_argument("--preview", type=whole(0), default=3, help="how many messages the diff shows")
RESUBMIT.add_argument("--yes", action="store_true", help="do not ask first")
RESUBMIT.rename("--limit", "--max-messages")
RESUBMIT.rename("--keep-ids", "--keep-message-id")
RESUBMIT.rename("--session-id", "--to-session-id")  # --session-id reads a session (%sb_peek, %sb_receive)


# core.resubmit's keywords the line gives as typed: the copies' ids, the fan-out, the rate, the brake, the canary's wait
AS_TYPED = ("keep_message_id", "allow_fan_out", "rate")


def message_edit(args: argparse.Namespace) -> MessageEdit:
    edit = MessageEdit(subject=args.subject, session_id=args.to_session_id, remove_properties=list(args.remove_prop))
    if args.patch is not None:
        try:
            edit.patch = json.loads(args.patch)
        except ValueError as exc:
            raise UsageError(f"--patch takes a JSON merge patch such as '{{\"total\": 0}}' ({exc}).") from None
    edit.set_properties = dict(parse_property(item) for item in args.prop)
    if args.ttl is not None:
        edit.time_to_live = duration(args.ttl, "--ttl").total_seconds()
    return edit


def _selection(
    source: str, where: Any, limit: int | None, preview: int, conn: Any, window: TimeWindow | None = None
) -> tuple[int, list[dict[str, Any]]]:
    """How many messages the command would move (at most ``limit``) and the first ``preview`` of
    them, for the confirmation. Memory stays flat: nothing else is kept. Without a search the
    count is the dead-letter count (one request to the administration API); where that is refused,
    or with a search, the DLQ is scanned; with a window, only its numbers are."""
    if window is not None:
        return _counted(records(source, window, conn), where, limit, preview)
    first = list(next(iter(core.scan(source, max_messages=max(preview, 1), connection=conn)), []))
    if where is None:
        try:
            total = core.counts(source, connection=conn).dead_letter
        except core.SbError as exc:
            print(f"(counting by scanning: the administration API said {exc.message})")
        else:
            total = total if EntityPath.parse(source).is_dead_letter else len(first)
            return (total if limit is None else min(total, limit)), first[:preview]
    return _counted((r for page in core.scan(source, connection=conn) for r in page), where, limit, preview)


def _counted(found: Iterable[dict[str, Any]], where: Any, limit: int | None, preview: int) -> tuple[int, list[Any]]:
    """How many records ``where`` selects (at most ``limit``), and the first ``preview`` of them."""
    count = 0
    shown: list[dict[str, Any]] = []
    for record in found:
        if where is None or where(record):
            count += 1
            if len(shown) < preview:
                shown.append(record)
            if count == limit:
                break
    return count, shown


@command(RESUBMIT)
def sb_resubmit(self: MagicsState, args: argparse.Namespace) -> Any:
    path = EntityPath.parse(args.entity)
    source = str(path if path.is_dead_letter else path.dead_letter)
    if args.target is not None and ":" in args.target:
        raise UsageError(
            f"--target {args.target}: a resubmit moves messages within one namespace, so the target is an entity "
            "of the source's connection (no NAME:); %sb_copy copies to another namespace."
        )
    edit = message_edit(args)
    where = core.compile_where(args.where) if args.where else None
    conn = self.conn()
    window = window_of(args)
    before = _resumed(self, source, args, conn).moved if args.resume else 0
    limit = None if args.max_messages is None else args.max_messages - before
    if limit is not None and limit < 1:
        print(f"Nothing to resubmit: the {args.max_messages} asked for were moved.")
        return None
    count, shown = _selection(source, where, limit, args.preview, conn, window)
    unevaluated(where)  # a search that raised on every message fails here: nothing moves
    if not count:
        matching = " matching --where" if where else ""
        print(f"Nothing to resubmit in {named(self, source)}{matching}{said(window)}.")
        return None
    target = args.target or str(default_target(EntityPath.parse(source)))
    print(
        f"Resubmit {count} message(s) from {named(self, source)}{said(window)} to {named(self, target)};"
        f" edit: {edit.describe()}."
    )
    src, dst = EntityPath.parse(source), EntityPath.parse(target)
    if src.is_subscription and not dst.is_subscription and dst.name.lower() == src.name.lower():  # its topic
        show_fan_out(source, target, args.where, window, conn, edited=not edit.empty)  # route.py
    if not edit.empty:
        for record in shown:
            print(diff(record, edit))
        if count > len(shown) > 0:
            print(f"... and {count - len(shown)} more, edited the same way.")
    if not args.yes:
        self.ask("The copies are sent first, the originals completed after.", "resubmit")

    run = functools.partial(
        _moving, self, args, source=source, target=target, edit=edit, most=before + count, conn=conn, window=window
    )
    report = run(args.resume, args.canary, count if args.canary is None else min(count, args.canary))
    left = count - report.count("resubmitted")
    if args.canary is None or not report.ok or left < 1:
        return report
    again = f"sb_resubmit {_again(args)}"
    if not canary_goes_on(self, report, left, target=named(self, target), verb="resubmit", again=again):
        return report
    return run(True, None, left)


def _moving(
    self: MagicsState, args: argparse.Namespace, resume: bool, canary: int | None, total: int, **plan: Any
) -> core.Report:
    """One core.resubmit of the line (``plan``: its source, target, edit, most, conn and window), its
    progress line and summary, and what to type next when it stopped part-way."""
    progress = Progress(named(self, plan["source"]), "Resubmitting from", "resubmitted", total=total)
    report = core.resubmit(
        plan["source"],
        target=plan["target"],
        where=args.where,  # compiled afresh: the Report counts what the resubmit's own peek could not evaluate
        edit=None if plan["edit"].empty else plan["edit"],
        max_messages=plan["most"],  # with --resume: what the runs before moved counts (core.resubmit)
        max_in_flight=self.max_in_flight if args.max_in_flight is None else args.max_in_flight,
        **{name: getattr(args, name) for name in AS_TYPED},
        brake=brake_of(args),
        canary=canary_of(args, canary),
        progress=progress.update,
        resume=resume,
        connection=plan["conn"],
        **within(plan["window"]),
    )
    label_report(self, report)
    print(report.summary())
    say_interrupted(report, "the same command with --resume moves the rest (nothing is moved twice)")
    say_braked(report, verb="resubmit", again=f"sb_resubmit {_again(args)}")
    return report


def _again(args: argparse.Namespace) -> str:
    """The line that goes on from where a run stopped: as typed, without its canary, with --resume."""
    typed = without_canary(args.typed)
    return typed if args.resume else f"{typed} --resume"


def _resumed(self: MagicsState, source: str, args: argparse.Namespace, conn: Any) -> Any:
    """--resume: what the unfinished resubmit did, said; refused when there is none."""
    target = args.target or str(default_target(EntityPath.parse(source)))
    point = core.resubmit_resume_point(source, target=target, allow_fan_out=args.allow_fan_out, connection=conn)
    if point is None:
        raise UsageError(
            f"Nothing to resume: no resubmit from {named(self, source)} to {named(self, target)} was left unfinished"
            " (the last one finished). Without --resume, the command moves what is there."
        )
    copied = f"; {len(point.copied)} whose copies are in {named(self, target)} are completed, not copied again"
    print(f"Resuming: {point.moved} message(s) moved before{copied if point.copied else ''}.")
    return point
