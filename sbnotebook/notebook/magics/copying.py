"""%sb_copy: copy messages by peeking (nothing locked or counted, the source untouched) to a queue
or topic of any connection, default or named (NAME:ENTITY)."""

from __future__ import annotations

import argparse
import functools
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ... import core
from ...core import DEAD_LETTER_QUEUE, EntityPath, LiveConnection, TimeWindow
from .brakes import add_brake, brake_of, canary_goes_on, canary_of, say_braked, without_canary
from .command import COUNT, add_max_in_flight, add_rate, command, parser
from .copying_many import copy_many
from .progress import Progress, say_interrupted
from .targets import address, check_exists, named_in
from .times import add_window, records, said, unevaluated, window_of

if TYPE_CHECKING:
    from .state import MagicsState

COPY = parser(
    "sb_copy",
    "Copy the messages of SOURCE (a queue, subscription or dead-letter queue) to the queue or topic\n"
    "TARGET, of this connection or a named one (NAME:ENTITY), by peeking: nothing is locked, no\n"
    "delivery counted, the source is left as it is. Every property is kept (the dead-letter reason\n"
    "and description too); message ids are fresh unless --keep-message-id. Counts first, then asks (type\n"
    "'copy') unless --yes. Interrupted, the same command again copies only what is left. A glob\n"
    f"(prod:orders*, 'prod:orders*/{DEAD_LETTER_QUEUE}') copies each queue it matches into the queue of\n"
    "the same name of the TARGET namespace (NAME:); missing ones are refused, or made with --create.\n"
    "A glob's brake counts what came back over all its entities and stops the glob (the entities after\n"
    "not begun); its canary copies K in all, over the entities in order.",
    f"  %sb_copy prod:orders/{DEAD_LETTER_QUEUE} home:orders     # production's dead letters, home\n"
    "  %sb_copy orders orders-copy --where 'body_json.total > 100' --max-messages 1000\n"
    "  %sb_copy prod:events/subscriptions/audit audit --keep-message-id --yes\n"
    f"  %sb_copy 'prod:orders*/{DEAD_LETTER_QUEUE}' home:            # each DLQ into the queue of its name at home\n"
    f"  %sb_copy prod:orders/{DEAD_LETTER_QUEUE} home:orders --enqueued-after 2h   # the last two hours' only\n"
    "  %sb_copy 'prod:orders*' home: --enqueued-after 2h      # each queue's last two hours, into its namesake\n"
    "  %sb_copy orders orders-replay --rate 50/s              # at most 50 messages a second\n"
    f"  %sb_copy orders/{DEAD_LETTER_QUEUE} orders --rate 50/s --stop-if-dead-letters 20   # stops if 20 come back\n"
    f"  %sb_copy orders/{DEAD_LETTER_QUEUE} orders --canary 20    # 20 first, their fate said, then asks\n"
    "  %sb_copy 'prod:orders*' home: --stop-if-dead-letters 50   # the glob stops once 50 came back in all",
)
COPY.add_argument("source", help=f"ENTITY or NAME:ENTITY to copy from (queue, subscription, .../{DEAD_LETTER_QUEUE})")
COPY.add_argument("target", help="ENTITY or NAME:ENTITY: the queue or topic the copies go to")
COPY.add_argument("--where", help="only messages matching this search expression")
COPY.add_argument("-n", "--max-messages", type=COUNT, help="at most this many messages")
add_window(COPY)
COPY.add_argument("--keep-message-id", action="store_true", help="keep the message ids (duplicate detection may drop)")
add_max_in_flight(COPY)
add_rate(COPY)
add_brake(COPY, "copy")
COPY.add_argument("--create", action="store_true", help="make targets that are missing from the source's description")
COPY.add_argument("--yes", action="store_true", help="do not ask first")
COPY.rename("--limit", "--max-messages")
COPY.rename("--keep-ids", "--keep-message-id")


def _create_like(source: str, target: str, src: LiveConnection, dst: LiveConnection) -> None:
    """--create: the missing target queue made from the source queue's description."""
    path = EntityPath.parse(source)
    if path.is_subscription:
        raise core.InvalidInputError(
            "--create makes a queue from a queue's description; this source is a subscription."
        )
    made = core.Report("create", target)
    core.ensure_targets([core.Match(path, EntityPath.parse(target))], src, dst, create=True, report=made)
    print(f"Made {target} from the description of {path.parent}. " + " ".join(made.notes[:-1]))


def _target_there(
    args: argparse.Namespace, exists: Future[None], source: str, target: str, src: LiveConnection, dst: LiveConnection
) -> None:
    """The target exists, or (``--create``) is made from the source's description; else refused, named as typed."""
    try:
        exists.result()
    except core.EntityNotFoundError as exc:  # named as typed: home:orders, not orders
        if not args.create:
            name, _ = core.split_address(args.target)  # read by address() above: the one reader of NAME:
            raise type(exc)(named_in(exc.message, name, target) if name else exc.message) from None
        _create_like(source, target, src, dst)


def _source_peeked(args: argparse.Namespace, peeked: Future[Any], source: str) -> None:
    """One peek of the source: a session-enabled source is refused before anything is counted or asked."""
    try:
        peeked.result()
    except core.SbError as exc:
        refused = core.sessions_refused(EntityPath.parse(source), exc, "a copy")
        if refused is None:
            raise
        name, _ = core.split_address(args.source)  # the line says prod:q, as typed
        raise core.InvalidInputError(named_in(refused.message, name, source) if name else refused.message) from None


def _count(source: str, where: Any, conn: LiveConnection, window: TimeWindow | None = None) -> int:
    """How many messages SOURCE holds (with a search: how many match, by scanning; with a window,
    how many it holds, peeking only its numbers; nothing kept)."""
    said = None
    if window is not None:
        return sum(1 for r in records(source, window, conn) if where is None or where(r))
    if where is None:
        path = EntityPath.parse(source)
        try:
            counts = core.counts(str(path.parent), connection=conn)
        except core.EntityNotFoundError:
            raise
        except core.SbError as exc:
            said = exc.message  # counted by scanning instead (which also says what is wrong, if anything)
        else:
            if path.sub_queue == "dead_letter":
                return counts.dead_letter
            if path.sub_queue == "transfer_dead_letter":
                return counts.transfer_dead_letter
            return counts.active + (0 if path.is_subscription else counts.scheduled)
    found = sum(1 for page in core.scan(source, connection=conn) for r in page if where is None or where(r))
    if said is not None:
        print(f"(counted by scanning: the administration API said {said})")
    return found


@command(COPY)
def sb_copy(self: MagicsState, args: argparse.Namespace) -> Any:
    if core.is_glob(args.source.split(":", 1)[-1]):
        return copy_many(self, args, _count)
    source, src = address(self, args.source)
    target, dst = address(self, args.target)
    core.copy_target(target)  # a subscription or a DLQ: said before anything is read
    where = core.compile_where(args.where) if args.where else None
    window = window_of(args)
    # The target's existence, the source's first peek and (from the administration API) its count:
    # a round trip each, to two namespaces, asked at once and read in that order. A count by
    # scanning (a search, a window) waits for the checks: it reads the whole source.
    with ThreadPoolExecutor(3, thread_name_prefix="sbnotebook-copy-checks") as pool:
        exists = pool.submit(check_exists, target, dst)
        peeked = pool.submit(core.peek_numbers, source, max_messages=1, connection=src)
        counted = pool.submit(_count, source, None, src) if where is None and window is None else None
        _target_there(args, exists, source, target, src, dst)
        _source_peeked(args, peeked, source)
        found = counted.result() if counted is not None else None
    options: dict[str, Any] = {
        "where": args.where,
        "keep_message_id": args.keep_message_id,
        "max_messages": args.max_messages,
    }
    # The window as typed: the copy's record on disk keys on it, so the same command resumes.
    options |= {"enqueued_after": args.enqueued_after, "enqueued_before": args.enqueued_before}
    state = core.copy_resume_point(source, target, source_connection=src, connection=dst, **options)
    copied = 0
    if state is not None and state.pending:  # recorded on disk: after an interrupt or a kernel restart
        copied = state.copied
        print(f"Resuming the copy: {copied} message(s) copied before.")
    found = _count(source, where, src, window) if found is None else found
    unevaluated(where)  # a search that raised on every message fails here: nothing copied
    todo = found if args.max_messages is None else min(found, args.max_messages)
    todo = max(todo - copied, 0)
    what = "matching message(s)" if where is not None else "message(s)"
    if not todo:
        matching = " matching --where" if where is not None else ""
        print(f"Nothing to copy from {args.source}{matching}{said(window)}.")
        return None
    ids = "their message ids" if args.keep_message_id else "fresh message ids"
    print(
        f"Copy {todo} {what} from {args.source}{said(window)} to {args.target} with {ids}"
        " (peeked: the source is left as it is)."
    )
    if not args.yes:
        self.ask("Nothing is taken from the source.", "copy")
    run = functools.partial(_copying, self, args, source, target, ends=(src, dst), options=options)
    report = run(args.canary, todo if args.canary is None else min(todo, args.canary))
    left = todo - report.count("sent")
    if args.canary is None or not report.ok or left < 1:
        return report
    again = f"sb_copy {without_canary(args.typed)}"
    if not canary_goes_on(self, report, left, target=args.target, verb="copy", again=again):
        return report
    return run(None, left)


def _copying(
    self: MagicsState,
    args: argparse.Namespace,
    source: str,
    target: str,
    canary: int | None,
    total: int,
    *,
    ends: tuple[LiveConnection, LiveConnection],
    options: dict[str, Any],
) -> core.Report:
    """One core.copy of the line (its record on disk resumes it), its progress and summary, and
    the line that goes on when the brake stopped it."""
    progress = Progress(args.target, f"Copying {args.source} to", "sent", total=total, relabel=False)
    report = core.copy(
        source,
        target,
        max_in_flight=self.max_in_flight if args.max_in_flight is None else args.max_in_flight,
        rate=args.rate,
        progress=progress.update,
        source_connection=ends[0],
        connection=ends[1],
        brake=brake_of(args),
        canary=canary_of(args, canary),
        **options,  # where as typed: it keys the record on disk (compiled above, so it was checked)
    )
    report.entity, report.target = args.source, args.target  # as typed: with their connections' names
    progress.finish(report)
    say_interrupted(report, "the same command again copies what is left")
    say_braked(report, verb="copy", again=f"sb_copy {without_canary(args.typed)}")
    return report
