"""%sb_copy with a glob: the queues it matches (or their dead-letter queues) of one connection, each
into the queue of the same name of another (``%sb_copy prod:orders* home:``): ``core.copy_many``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ... import core
from .brakes import brake_of, canary_goes_on, canary_of, say_braked, without_canary
from .progress import Progress, say_interrupted
from .times import said, window_of

if TYPE_CHECKING:
    from .state import MagicsState


def _side(self: MagicsState, text: str) -> tuple[str, core.LiveConnection, str]:
    """(the connection's name as typed, or '', its connection, what follows the colon)."""
    if ":" not in text:
        return "", self.conn(), text
    name, rest = text.split(":", 1)
    return name, self.named(name), rest


def copy_many(self: MagicsState, args: argparse.Namespace, count: Any) -> Any:
    """``%sb_copy`` of a glob (``count(source, where, connection, window)``: how many a source holds,
    in the window)."""
    src_name, src, pattern = _side(self, args.source)
    dst_name, dst, rest = _side(self, args.target)
    if rest.strip() or not dst_name:
        raise core.InvalidInputError(
            f"A glob copies each entity into the one of the same name of a namespace: give the target as NAME: "
            f"(%sb_copy {args.source} home:), not {args.target!r}."
        )
    found, topics = core.glob_matches(pattern, src)
    if topics:
        print(f"Not copied (topics: their messages are in their subscriptions): {', '.join(topics)}.")
    if not found:
        print(f"No queue of {src_name or 'this connection'} matches {pattern!r}: nothing copied.")
        return None
    missing = {m.target.name for m in core.missing_targets(found, dst)}
    if missing and not args.create:
        raise core.EntityNotFoundError(
            f"Not in {dst_name}: {', '.join(sorted(missing))}. Create them first, or add --create to make each "
            "from its source's description; nothing was copied."
        )
    where = core.compile_where(args.where) if args.where else None
    window = window_of(args)  # each entity's messages of this window only (a bad WHEN fails here)
    held: dict[str, int] = {}
    for m in found:
        made = " (made from the source's description)" if m.target.name in missing else ""
        held[str(m.source)] = count(str(m.source), where, src, window)
        print(f"  {src_name}:{m.source} -> {dst_name}:{m.target}: {held[str(m.source)]} message(s){made}")
    ids = "their message ids" if args.keep_message_id else "fresh message ids"
    print(f"Copy {len(found)} entities{said(window)} with {ids} (peeked: the sources are left as they are).")
    if not args.yes:
        self.ask("Nothing is taken from the sources.", "copy")
    ends = (src_name, src, dst_name, dst)
    report = _copying(self, args, pattern, ends, held, args.canary)
    if args.canary is None or not report.ok or "canary" not in report.stats:
        return report
    left = sum(held.values()) - report.count("sent")  # as counted before the run (less, if it resumed)
    if left < 1 or "nothing was left to copy" in " ".join(report.notes):
        return report
    again = f"sb_copy {without_canary(args.typed)}"
    if not canary_goes_on(self, report, left, target=dst_name, verb="copy", again=again):
        return report
    return _copying(self, args, pattern, ends, held, None)


def _copying(
    self: MagicsState,
    args: argparse.Namespace,
    pattern: str,
    ends: tuple[str, core.LiveConnection, str, core.LiveConnection],
    held: dict[str, int],
    canary: int | None,
) -> core.Report:
    """One core.copy_many of the line (its records on disk resume it), a bar per entity, and the
    line that goes on when the brake stopped it."""
    src_name, src, dst_name, dst = ends
    bars: dict[str, Progress] = {}

    def progress(match: Any, report: core.Report) -> None:
        bar = bars.get(str(match.source))
        if bar is None:  # the entity's copy starts
            what, total = f"Copying {src_name}:{match.source} to", held[str(match.source)]
            bar = bars[str(match.source)] = Progress(f"{dst_name}:{match.target}", what, "sent", total, relabel=False)
        bar.update(report)

    report = core.copy_many(
        pattern,
        source_connection=src,
        connection=dst,
        create=args.create,
        where=args.where,
        max_messages=args.max_messages,
        keep_message_id=args.keep_message_id,
        max_in_flight=self.max_in_flight if args.max_in_flight is None else args.max_in_flight,
        rate=args.rate,
        progress=progress,
        # As typed: the glob's record on disk keys on it (an age resumes as typed, with its first instants).
        enqueued_after=args.enqueued_after,
        enqueued_before=args.enqueued_before,
        brake=brake_of(args),
        canary=canary_of(args, canary),
    )
    report.entity, report.target = args.source, f"{dst_name} namespace"
    for part in report.parts:
        bar = bars.get(part.entity)
        part.entity, part.target = f"{src_name}:{part.entity}", f"{dst_name}:{part.target}"
        if bar is not None:
            bar.finish(part)
    say_interrupted(report, "the same command again copies what is left (the entities copied in full are not read)")
    again = f"sb_copy {without_canary(args.typed)}"
    say_braked(report, verb="copy", again=again, after=" (the entities after it not begun)")
    return report
