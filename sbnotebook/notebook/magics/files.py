"""%sb_export and %sb_import: an entity (or a search) to a JSON lines file, and a file back."""

from __future__ import annotations

import argparse
import html
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.display import display

from ... import core
from ...core import count_jsonl, export_resume_point, import_resume_point
from .command import add_max_in_flight, add_rate, command, parser
from .progress import Progress, say_interrupted
from .targets import shown, with_dlq
from .times import add_window, said, window_of

if TYPE_CHECKING:
    from .state import MagicsState

EXPORT = parser(
    "sb_export",
    "Write every message of an entity (or every match of a search) to a JSON lines file with every\n"
    "property (binary bodies base64), read with the scanner; nothing is locked or counted.\n"
    "Interrupted, the same command again appends what is left (FILE.exporting marks it unfinished).",
    "  %sb_export orders orders.jsonl\n"
    "  %sb_export orders parked.jsonl --dlq\n"
    "  %sb_export orders big.jsonl --where 'body_json.total > 100'\n"
    "  %sb_export orders outage.jsonl --dlq --enqueued-after 2026-11-25T14:00 --enqueued-before 2026-11-25T15:00",
)
EXPORT.add_argument("entity")
EXPORT.add_argument(
    "file", help="the JSON lines file to write (replaced if it exists, unless an export of it was interrupted)"
)
EXPORT.add_argument("--dlq", action="store_true", help="export the dead-letter queue")
EXPORT.add_argument("--where", help="only messages matching this search expression")
add_window(EXPORT)

IMPORT = parser(
    "sb_import",
    "Send every message of a JSON lines export to a queue or topic as it was: the body of its kind\n"
    "(data, AMQP value or sequence), content type, subject, correlation id, session id, TTL, and every\n"
    "application property with the type the file records. Message ids are fresh unless\n"
    "--keep-message-id. The file is checked first: a bad line sends nothing. Interrupted, the same\n"
    "command again sends only what is left (FILE.importing-ENTITY keeps track).",
    "  %sb_import orders-copy orders.jsonl\n  %sb_import orders parked.jsonl --keep-message-id\n"
    "  %sb_import orders parked.jsonl --rate 3000/m",
)
IMPORT.add_argument("entity", help="queue or topic")
IMPORT.add_argument("file", help="a JSON lines export (%%sb_export, the browser's Export JSON)")
IMPORT.add_argument("--keep-message-id", action="store_true", help="keep the exported message ids")
IMPORT.add_argument(
    "--decode-properties",
    action="store_true",
    help="for files without property types (written by other tools): send JSON numbers and booleans as such",
)
add_max_in_flight(IMPORT)
add_rate(IMPORT)
IMPORT.rename("--keep-ids", "--keep-message-id")


class _ReadProgress:
    """The export's live line: messages read and written so far."""

    def __init__(self, entity: str) -> None:
        self.entity = entity
        self.handle: Any = None
        self.started = time.monotonic()

    def update(self, read: int, written: int) -> None:
        elapsed = time.monotonic() - self.started
        rate = f", {read / elapsed:.0f} msg/s" if elapsed > 0 else ""
        text = f"Exporting {self.entity}: {read} read, {written} written{rate}"
        bundle = {"text/plain": text, "text/html": f"<progress></progress> {html.escape(text)}"}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)


@command(EXPORT)
def sb_export(self: MagicsState, args: argparse.Namespace) -> Any:
    entity = with_dlq(args.entity, args.dlq)
    window = window_of(args)  # a bad WHEN fails before the file is touched
    given = {"enqueued_after": args.enqueued_after, "enqueued_before": args.enqueued_before}
    resume = export_resume_point(entity, args.file, args.where, **given)
    if resume is not None:
        print(f"Resuming the export into {args.file}: {resume[0]} messages already written.")
    progress = _ReadProgress(shown(self, entity))
    # The window as typed: an interrupted export of "2h" resumes with the same command.
    written = core.export_jsonl(
        entity, args.file, where=args.where, progress=progress.update, connection=self.conn(), **given
    )
    what = "matching messages" if args.where else "messages"
    print(f"Exported {written} {what} of {shown(self, entity)}{said(window)} to {Path(args.file)}.")
    text = getattr(written, "unevaluated_text", None)
    if text:
        print(f"Note: {text}; they are not matches.")
    return None


@command(IMPORT)
def sb_import(self: MagicsState, args: argparse.Namespace) -> Any:
    if not Path(args.file).is_file():
        raise core.InvalidInputError(f"No file {args.file}: give the path of a JSON lines export.")
    # Before the first line is printed: a marker that cannot be read or a changed file refuses the
    # import in one line, which then follows no "Importing ..." for an import that does not happen.
    resume = import_resume_point(args.entity, args.file)
    total = count_jsonl(args.file)
    ids = "their exported message ids" if args.keep_message_id else "fresh message ids"
    print(f"Importing {total} messages from {args.file} into {shown(self, args.entity)} with {ids}.")
    if resume is not None and resume.pending:
        print(f"Resuming: lines up to {resume.done} were sent before ({len(resume.failed)} of them failed).")
    progress = Progress(shown(self, args.entity), "Importing into", "sent", total=total)
    report = core.import_jsonl(
        args.entity,
        args.file,
        keep_message_id=args.keep_message_id,
        decode_properties=args.decode_properties,
        max_in_flight=self.max_in_flight if args.max_in_flight is None else args.max_in_flight,
        rate=args.rate,
        progress=progress.update,
        connection=self.conn(),
    )
    progress.finish(report)
    say_interrupted(report, "the same command again sends what is left")
    return report
