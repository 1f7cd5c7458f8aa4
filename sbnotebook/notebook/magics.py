"""The %sb_* magics: thin commands over the settlement library.

Every command takes ``-h`` (and ``%sb_peek?`` shows the same help). Errors a user can fix print one
line; ``%config SbMagics.full_tracebacks = True`` shows the whole traceback instead.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import html
import logging
import re
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.display import display
from traitlets import Bool, Float, Int

from .. import core
from ..core import EntityPath, InvalidInputError, LiveConnection, LockedBatch, Report, SbError, redact
from ..core.outcome import PROBLEMS
from . import plots
from .cells import parse_cell, parse_rows, parse_when
from .config import project_settings
from .pages import Found, find


class _HelpShown(Exception):
    """-h was given: the help is printed, nothing else happens."""


class Declined(Exception):
    """The user did not confirm a destructive action."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} -h)")

    def parse_line(self, line: str) -> argparse.Namespace:
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"{self.prog}: {exc}") from None
        if "-h" in argv or "--help" in argv:
            print(self.format_help())
            raise _HelpShown
        return self.parse_args(argv)


def _parser(name: str, description: str, examples: str) -> _Parser:
    return _Parser(
        prog=f"%{name}",
        description=description,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )


CONNECT = _parser(
    "sb_connect",
    "Choose the Service Bus namespace. With nothing configured, use the embedded emulator.",
    "  %sb_connect                                   # env settings, else the embedded emulator\n"
    "  %sb_connect $conn_str                         # a connection string held in a variable\n"
    "  %sb_connect --namespace contoso.servicebus.windows.net   # Entra ID (DefaultAzureCredential)\n"
    "  %sb_connect --secret my-scope/servicebus      # Databricks secret scope\n"
    "  %sb_connect --emulator                        # the embedded emulator, whatever is configured",
)
CONNECT.add_argument("connection", nargs="?", help="a connection string (never echoed)")
CONNECT.add_argument("--namespace", help="fully qualified namespace, signed in with DefaultAzureCredential")
CONNECT.add_argument("--secret", metavar="SCOPE/KEY", help="read the connection string from a Databricks secret")
CONNECT.add_argument("--emulator", action="store_true", help="use the embedded emulator")

ENTITIES = _parser(
    "sb_entities",
    "Queues, topics and subscriptions with their message counts.",
    "  %sb_entities\n  df = %sb_entities",
)

PEEK = _parser(
    "sb_peek",
    "Look at messages without locking them or raising delivery counts. Returns a DataFrame.",
    "  %sb_peek orders\n"
    "  df = %sb_peek orders -n 500 --json\n"
    "  %sb_peek orders --from-seq 101                 # the next page\n"
    "  %sb_peek orders --dlq --where 'dead_letter_reason == \"MaxDeliveryCountExceeded\"'\n"
    '  %sb_peek orders --where \'$.customer.id == "c-7" and props.priority == "high"\'\n'
    "  %sb_peek sessions --session s-1",
)
PEEK.add_argument("entity", help="queue, topic/subscriptions/name, or either with /$deadletterqueue")
PEEK.add_argument("-n", type=int, dest="count", help="how many messages (default: SbMagics.peek_count)")
PEEK.add_argument("--from-seq", type=int, default=1, dest="from_seq", help="first sequence number")
PEEK.add_argument("--dlq", action="store_true", help="peek the entity's dead-letter queue")
PEEK.add_argument("--session", help="peek one session")
PEEK.add_argument("--where", help="search expression over properties and body fields ($.a.b, body.a, props.p)")
PEEK.add_argument("--scan", type=int, default=10_000, help="with --where: look through at most this many messages")
PEEK.add_argument("--json", action="store_true", help="decode JSON bodies into body.* columns")

RECEIVE = _parser(
    "sb_receive",
    "Receive messages. peek-lock (default) returns a locked batch to settle with %sb_settle or its methods;\n"
    "its locks are renewed while you work. receive-and-delete removes the messages at once (asks first).",
    "  batch = %sb_receive orders -n 20\n"
    "  batch.complete([0, 1]); batch.dead_letter([2], reason='bad-total')\n"
    "  %sb_receive orders --mode receive-and-delete --yes\n"
    "  %sb_receive orders --deferred 41,42              # fetch deferred messages by sequence number",
)
RECEIVE.add_argument("entity")
RECEIVE.add_argument("-n", type=int, dest="count", help="how many messages (default: SbMagics.receive_count)")
RECEIVE.add_argument("--mode", choices=["peek-lock", "receive-and-delete"], default="peek-lock")
RECEIVE.add_argument("--wait", type=float, help="seconds to wait for the first message")
RECEIVE.add_argument("--dlq", action="store_true", help="receive from the dead-letter queue")
RECEIVE.add_argument("--session", help="receive from one session")
RECEIVE.add_argument("--deferred", metavar="SEQ,...", help="fetch these deferred messages by sequence number")
RECEIVE.add_argument("--yes", action="store_true", help="do not ask before receive-and-delete")
RECEIVE.add_argument("--panel", action="store_true", help="show the settlement panel for the batch")

BROWSE = _parser(
    "sb_browse",
    "The message browser: page by sequence number, search bodies and properties, inspect, export.",
    "  %sb_browse orders\n  %sb_browse orders --dlq -n 100",
)
BROWSE.add_argument("entity")
BROWSE.add_argument("--dlq", action="store_true", help="browse the dead-letter queue")
BROWSE.add_argument("-n", type=int, dest="count", default=50, help="messages per page")

COMPOSE = _parser(
    "sb_compose",
    "The send panel: compose a message (body, content type, subject, properties, schedule) and send it.",
    "  %sb_compose orders",
)
COMPOSE.add_argument("entity")

SETTLE = _parser(
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

SEND = _parser(
    "sb_send",
    "Send the cell's messages: JSON lines, a JSON array, or a Python expression (a list or DataFrame).\n"
    "Every send is awaited; at most --max-in-flight operations are outstanding. Invalid JSON sends nothing.",
    '  %%sb_send orders\n  {"order": 1, "total": 9.5}\n  {"order": 2, "total": 12}\n\n'
    "  %%sb_send results --max-in-flight 32\n  results_df\n\n"
    '  %%sb_send orders --schedule +10m\n  [{"body": {"order": 3}, "subject": "reminder"}]',
)
SEND.add_argument("entity", help="queue or topic")
SEND.add_argument("--max-in-flight", type=int, dest="max_in_flight", help="default: SbMagics.max_in_flight")
SEND.add_argument("--schedule", metavar="WHEN", help="+30s, 10m, 2h, or an ISO time")
SEND.add_argument("--format", choices=["auto", "json", "jsonl", "python"], default="auto")
SEND.add_argument("--no-batch", action="store_true", help="one message per send operation")

DLQ = _parser(
    "sb_dlq",
    "Triage a dead-letter queue: the triage panel with widgets, else a summary by dead-letter reason.",
    "  %sb_dlq orders\n  %sb_dlq events/subscriptions/audit --summary",
)
DLQ.add_argument("entity", help="the entity whose dead-letter queue to look at")
DLQ.add_argument("--summary", action="store_true", help="the summary table, not the panel")
DLQ.add_argument("-n", type=int, dest="count", default=1000, help="how many dead-lettered messages to read")

STATS = _parser(
    "sb_stats",
    "Counts over time (each call adds a sample; --samples takes several) and message age, as a plotly figure.",
    "  %sb_stats orders\n  %sb_stats orders --samples 10 --interval 2\n  fig = %sb_stats orders --reset",
)
STATS.add_argument("entity")
STATS.add_argument("--samples", type=int, default=1, help="how many count samples to take now")
STATS.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
STATS.add_argument("-n", type=int, dest="count", default=1000, help="how many messages to peek for their age")
STATS.add_argument("--reset", action="store_true", help="forget earlier samples of this entity")


def _command(parser: _Parser, *, cell: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Parse the line, print help for -h, and turn user errors into one line."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: SbMagics, line: str, cell_text: str | None) -> Any:
            args = None
            try:
                args = parser.parse_line(line)
                return fn(self, args, cell_text) if cell else fn(self, args)
            except _HelpShown:
                return None
            except (SbError, UsageError, Declined, StdinNotImplementedError) as exc:
                if self.full_tracebacks:
                    raise
                self.fail(_explain(exc, args))
                return None
            finally:
                self.sdk_logs.summarise()

        wrapper: Callable[..., Any]
        if cell:

            @functools.wraps(fn)
            def cell_wrapper(self: SbMagics, line: str, cell_text: str | None = None) -> Any:
                if cell_text is None and not {"-h", "--help"} & set(line.split()):
                    self.fail(UsageError(f"{parser.prog} is a cell magic: %{parser.prog} ENTITY, messages below."))
                    return None
                return run(self, line, cell_text or "")

            wrapper = cell_wrapper
        else:

            @functools.wraps(fn)
            def line_wrapper(self: SbMagics, line: str) -> Any:
                return run(self, line, None)

            wrapper = line_wrapper
        wrapper.__doc__ = parser.format_help()
        return wrapper

    return decorate


@magics_class
class SbMagics(Magics):
    """Service Bus in the notebook. Settings: ``%config SbMagics`` (or [tool.sbnotebook] in pyproject.toml)."""

    peek_count = Int(100, help="How many messages %sb_peek shows by default.").tag(config=True)
    receive_count = Int(10, help="How many messages %sb_receive takes by default.").tag(config=True)
    max_in_flight = Int(10, help="Send and settlement operations in flight at once.").tag(config=True)
    wait_seconds = Float(5.0, help="How long %sb_receive waits for the first message.").tag(config=True)
    max_renewal = Float(300.0, help="Seconds a received batch's locks are renewed for while open.").tag(config=True)
    full_tracebacks = Bool(False, help="Show full tracebacks instead of one-line errors.").tag(config=True)
    confirm = Bool(True, help="Ask before destructive actions (receive-and-delete, settling every row).").tag(
        config=True
    )

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        explicit = set(self.config.get("SbMagics", {}))
        for name, value in project_settings(self.trait_names(config=True)).items():
            if name not in explicit:
                setattr(self, name, value)
        self.connection: LiveConnection | None = None  # from %sb_connect; every command and panel uses it
        self.batches: list[LockedBatch] = []
        self.samples: dict[str, list[tuple[dt.datetime, core.EntityCounts]]] = {}
        self.sdk_logs = SdkLogSummary()
        self.sdk_logs.install(show=self.full_tracebacks)
        self.observe(lambda change: self.sdk_logs.install(show=change["new"]), names="full_tracebacks")

    # ------------------------------------------------------------ helpers

    def fail(self, exc: BaseException) -> None:
        kind = "sbnotebook" if isinstance(exc, UsageError | Declined) else type(exc).__name__
        message = str(exc) or "input is not available here; repeat the command with --yes"
        message = _BYTES_REPR.sub(lambda m: m.group(2), " ".join(message.split()))
        print(f"{kind}: {redact(message)}", file=sys.stderr)

    def conn(self) -> LiveConnection:
        """The live connection every command passes on (the first command connects if needed)."""
        if self.connection is None:
            self.connection = core.connect()
            if self.connection.is_emulator:
                print(
                    f"Using the embedded Service Bus emulator at {self.connection.namespace} (%sb_connect to change)."
                )
        return self.connection

    def ask(self, question: str, expected: str) -> None:
        """Destructive actions need the expected word typed back (or --yes, or confirm=False)."""
        if not self.confirm:
            return
        answer = input(f"{question} Type '{expected}' to go on: ")
        if answer.strip().lower() != expected:
            raise Declined("Cancelled: nothing was changed.")

    def _batch(self, name: str | None) -> LockedBatch:
        if name is not None:
            value = self.shell.user_ns.get(name) if self.shell is not None else None
            if not isinstance(value, LockedBatch):
                raise UsageError(f"{name!r} is not a variable holding a locked batch from %sb_receive.")
            return value
        if not self.batches:
            raise UsageError("No locked batch yet: receive one with %sb_receive ENTITY.")
        return self.batches[-1]

    # ------------------------------------------------------------ commands

    @line_magic
    @_command(CONNECT)
    def sb_connect(self, args: argparse.Namespace) -> None:
        chosen = [x for x in (args.connection, args.namespace, args.secret) if x] + ([True] if args.emulator else [])
        if len(chosen) > 1:
            raise UsageError("%sb_connect: give one of CONNECTION, --namespace, --secret or --emulator.")
        if args.emulator:
            self.connection = core.connect(core.connection.embedded.connection())
        elif args.secret:
            self.connection = core.connect(self._databricks_secret(args.secret))
        elif args.connection or args.namespace:
            self.connection = core.connect(args.connection, namespace=args.namespace)
        elif self.connection is None:
            self.connection = core.connect()
        print(f"Connected to {self.connection.settings}.")

    def _databricks_secret(self, spec: str) -> str:
        scope, _, key = spec.partition("/")
        if not scope or not key:
            raise UsageError("--secret takes SCOPE/KEY, for example --secret my-scope/servicebus.")
        dbutils = self.shell.user_ns.get("dbutils") if self.shell is not None else None
        if dbutils is None:
            raise UsageError("--secret reads a Databricks secret scope, but dbutils is not available here.")
        try:
            value = dbutils.secrets.get(scope=scope, key=key)
        except Exception as exc:
            raise UsageError(f"Cannot read secret {scope}/{key}: {type(exc).__name__}.") from None
        return str(value)

    @line_magic
    @_command(ENTITIES)
    def sb_entities(self, args: argparse.Namespace) -> Any:
        import pandas as pd

        rows = core.list_entities(connection=self.conn())
        columns = ["entity", "kind", "active", "dead_letter", "scheduled", "transfer_dead_letter", "total"]
        return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in rows], columns=columns)

    @line_magic
    @_command(PEEK)
    def sb_peek(self, args: argparse.Namespace) -> Any:
        entity = _with_dlq(args.entity, args.dlq)
        count = args.count if args.count is not None else self.peek_count
        if count < 1 or args.scan < 1:
            raise UsageError("-n and --scan must be 1 or more.")
        found = find(
            entity,
            start=args.from_seq,
            count=count,
            where=args.where,
            scan_limit=args.scan,
            session_id=args.session,
            connection=self.conn(),
        )
        _summarise_page(entity, found, args.where is not None, args.scan, args.where)
        frame = core.to_dataframe(found.records)
        return core.json_columns(frame) if args.json else frame

    @line_magic
    @_command(RECEIVE)
    def sb_receive(self, args: argparse.Namespace) -> Any:
        entity = _with_dlq(args.entity, args.dlq)
        count = args.count if args.count is not None else self.receive_count
        common: dict[str, Any] = {
            "max_in_flight": self.max_in_flight,
            "max_renewal": self.max_renewal,
            "connection": self.conn(),
        }
        if args.deferred:
            seqs = _sequence_numbers(args.deferred)
            batch = core.receive_deferred(entity, seqs, **common)
        else:
            if args.mode == "receive-and-delete" and not args.yes:
                self.ask(f"receive-and-delete removes up to {count} messages from {entity} for good.", "delete")
            batch = core.receive(
                entity,
                count=count,
                mode=args.mode,
                wait=self.wait_seconds if args.wait is None else args.wait,
                session_id=args.session,
                **common,
            )
        self.batches.append(batch)
        if len(batch) == 0:
            print(f"No messages arrived from {entity}.")
        elif batch.mode == "peek-lock":
            left = [s for s in batch.seconds_left() if s is not None]
            print(
                f"{len(batch)} messages locked from {entity} (locks {min(left):.0f} s, renewed for up to "
                f"{self.max_renewal:.0f} s). Settle with %sb_settle or the batch's methods."
            )
        else:
            print(f"{len(batch)} messages received and deleted from {entity}.")
        if args.panel and len(batch):
            from .widgets import SettlementPanel

            return SettlementPanel(batch)
        return batch

    @line_magic
    @_command(BROWSE)
    def sb_browse(self, args: argparse.Namespace) -> Any:
        from .widgets import MessageBrowser

        return MessageBrowser(args.entity, dead_letter=args.dlq, page_size=args.count, connection=self.conn())

    @line_magic
    @_command(COMPOSE)
    def sb_compose(self, args: argparse.Namespace) -> Any:
        from .widgets import SendPanel

        _check_exists(args.entity, self.conn())
        return SendPanel(args.entity, connection=self.conn(), max_in_flight=self.max_in_flight)

    @line_magic
    @_command(SETTLE)
    def sb_settle(self, args: argparse.Namespace) -> Any:
        batch = self._batch(args.batch)
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
                self.ask(f"{args.action} all {len(batch.unsettled)} unsettled messages of {batch.entity}?", "yes")
            if rows is None:  # 'all': every row not settled yet, lost locks included (they report as lost)
                rows = [i for i in range(len(batch)) if batch.status(i) in ("locked", "lock_lost")]
                if not rows:
                    print(f"Every row of this batch of {batch.entity} is settled already; nothing to {args.action}.")
                    return batch.to_pandas()
            if args.action == "dead-letter":
                report = batch.dead_letter(rows, reason=args.reason, description=args.description)
            else:
                report = getattr(batch, args.action)(rows)
        print(report.summary())
        return report.to_pandas()

    @line_cell_magic
    @_command(SEND, cell=True)
    def sb_send(self, args: argparse.Namespace, cell: str) -> Any:
        user_ns = self.shell.user_ns if self.shell is not None else {}
        try:
            messages = parse_cell(cell, user_ns, args.format)
        except SbError:
            raise
        except Exception as exc:  # the cell's Python expression failed
            raise InvalidInputError(f"The cell's expression failed: {type(exc).__name__}: {exc}") from None
        progress = _Progress(args.entity)
        kwargs: dict[str, Any] = {
            "max_in_flight": args.max_in_flight or self.max_in_flight,
            "batch": not args.no_batch,
            "progress": progress.update,
            "connection": self.conn(),
        }
        if args.schedule:
            kwargs["schedule_at"] = parse_when(args.schedule)
        report = core.send(args.entity, messages, **kwargs)
        progress.finish(report)
        return report

    @line_magic
    @_command(DLQ)
    def sb_dlq(self, args: argparse.Namespace) -> Any:
        path = EntityPath.parse(args.entity).parent
        if not args.summary:
            panel = _triage_panel(str(path), self.conn())
            if panel is not None:
                return panel
        page = core.peek(_with_dlq(str(path), True), count=args.count, connection=self.conn())
        table = plots.reason_counts(page.records)
        print(f"{len(page)} dead-lettered messages in {path} by reason.")
        return table

    @line_magic
    @_command(STATS)
    def sb_stats(self, args: argparse.Namespace) -> Any:
        if args.samples < 1 or args.interval < 0:
            raise UsageError("--samples must be 1 or more and --interval 0 or more.")
        path = str(EntityPath.parse(args.entity))
        history = self.samples.setdefault(path, [])
        if args.reset:
            history.clear()
        for i in range(args.samples):
            if i:
                time.sleep(args.interval)
            history.append((dt.datetime.now(dt.UTC), core.counts(path, connection=self.conn())))
        page = core.peek(path, count=args.count, connection=self.conn())
        return _stats_figure(path, history, page.records)


# ------------------------------------------------------------------ pieces


_BYTES_REPR = re.compile(r"""\bb(['"])(.*?)\1""")


def _explain(exc: BaseException, args: argparse.Namespace | None) -> BaseException:
    """A service error a user can act on, said in their terms (what to type next)."""
    if not isinstance(exc, SbError) or args is None or not getattr(args, "entity", None):
        return exc
    entity, text = args.entity, str(exc)
    if "requires session" in text or "non-sessionful" in text:
        command = "%sb_receive" if getattr(args, "mode", None) else "%sb_peek"
        return UsageError(
            f"{entity} requires sessions: name one with --session ID (for example {command} {entity} --session s-1)."
        )
    if getattr(args, "deferred", None) and ("MessageNotFound" in text or "deferred message" in text):
        return UsageError(
            f"No deferred message with sequence number {args.deferred} in {entity}: "
            f"%sb_peek {entity} shows the sequence numbers whose state is 'deferred'."
        )
    return exc


def _check_exists(entity: str, connection: LiveConnection) -> None:
    """A misspelled entity fails now, in one line (not at the first send). Other admin errors (no
    Manage right) are left to the send itself."""
    try:
        core.counts(str(EntityPath.parse(entity).parent), connection=connection)
    except core.EntityNotFoundError:
        raise
    except SbError:
        return


class SdkLogSummary(logging.Handler):
    """Azure SDK log records (warnings and errors, often with tracebacks) are counted while the
    extension is loaded, and each command ends with one line saying how many and the last one.
    ``%config SbMagics.full_tracebacks = True`` lets them through as they are."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.last = ""
        self._propagate: bool | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        try:
            self.last = " ".join(record.getMessage().split())[:160]
        except Exception:  # a record that cannot format itself is still counted
            self.last = record.msg if isinstance(record.msg, str) else ""

    def install(self, *, show: bool = False) -> None:
        self.uninstall()
        if show:
            return
        azure = logging.getLogger("azure")
        azure.addHandler(self)
        self._propagate, azure.propagate = azure.propagate, False

    def uninstall(self) -> None:
        azure = logging.getLogger("azure")
        if self in azure.handlers:
            azure.removeHandler(self)
        if self._propagate is not None:
            azure.propagate, self._propagate = self._propagate, None

    def summarise(self) -> None:
        count, last = self.count, self.last
        if not count:
            return
        self.count, self.last = 0, ""
        print(
            f"sbnotebook: the Azure SDK logged {count} warning(s) (last: {redact(last)}); "
            "%config SbMagics.full_tracebacks = True shows them in full.",
            file=sys.stderr,
        )


def _with_dlq(entity: str, dlq: bool) -> str:
    path = EntityPath.parse(entity)
    return str(EntityPath(path.name, path.subscription, "dead_letter")) if dlq else str(path)


def _sequence_numbers(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"--deferred takes sequence numbers such as 41,42, not {text!r}.") from None


def _summarise_page(entity: str, found: Found, searched: bool, scan_limit: int, where: str | None = None) -> None:
    records = found.records
    text = f"{len(records)} of {found.scanned} scanned messages matched" if searched else f"{len(records)} messages"
    text += f" from {entity}"
    if records:
        text += f" (sequence numbers {records[0]['sequence_number']}..{records[-1]['sequence_number']})"
    if searched and found.scanned >= scan_limit:
        text += f"; stopped at the --scan limit of {scan_limit}"
    if found.scanned and found.next_start > found.start:
        text += f"; next page: --from-seq {found.next_start}"
    print(text + ".")
    hint = found.hint(where) if searched else None
    if hint:
        print(hint)


class _Progress:
    """A live line in the notebook (a progress bar where HTML renders, plain text elsewhere)."""

    def __init__(self, entity: str) -> None:
        self.entity = entity
        self.handle: Any = None
        self.last = 0.0

    def update(self, report: Report) -> None:
        now = time.monotonic()
        if now - self.last < 0.3:
            return
        self.last = now
        text = f"Sending to {self.entity}: {report.count('sent')} sent, {report.failed} failed"
        bundle = {"text/plain": text, "text/html": f"<progress></progress> {html.escape(text)}"}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)

    def finish(self, report: Report) -> None:
        verdict = "all sent" if report.ok else f"{report.failed} FAILED"
        operations = report.stats.get("operations", 0)
        text = f"{report.summary()} ({verdict}), {report.rate:.0f} msg/s, {operations} operations."
        if self.handle is not None:
            self.handle.update({"text/plain": text, "text/html": html.escape(text)}, raw=True)
        else:
            print(text)
        if report.failures:
            frame = report.to_pandas()
            display(frame[frame["outcome"].isin(PROBLEMS)])


def _stats_figure(entity: str, history: list[tuple[dt.datetime, core.EntityCounts]], records: list[Any]) -> Any:
    from plotly.subplots import make_subplots

    depth = plots.depth_over_time(history, entity)
    age = plots.message_age(records)
    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"Depth of {entity}", age.layout.title.text))
    for trace in depth.data:
        fig.add_trace(trace, row=1, col=1)
    for trace in age.data:
        fig.add_trace(trace, row=1, col=2)
    fig.update_xaxes(title_text="time", row=1, col=1)
    fig.update_xaxes(title_text="seconds since enqueued", row=1, col=2)
    fig.update_yaxes(title_text="messages", row=1, col=1)
    fig.update_layout(template="plotly_white", height=380)
    return fig


def _triage_panel(entity: str, connection: LiveConnection) -> Any:
    """The dead-letter triage panel when ipywidgets is there; None otherwise (the summary is shown)."""
    try:
        from .widgets import TriagePanel
    except ImportError:
        return None
    return TriagePanel(entity, connection=connection)
