"""The SbMagics class: settings, the state commands share (live connection, batches, samples),
and the registration of every command family's magics."""

from __future__ import annotations

import datetime as dt
from typing import Any, NoReturn

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from traitlets import Bool, CaselessStrEnum, Float, Int, observe

from ... import core
from ...core import LiveConnection, LockedBatch, deprecated
from ..config import project_settings
from ..widgets import grid as grid_mod
from . import connect, copying, dlq, entities, files, peek, purge, receive, resubmit, send, sessions, stats, tail
from .command import Declined, fail
from .sdklogs import SdkLogSummary
from .state import NameCache

RENAMED_SETTINGS = {"peek_count": "peek_max_messages", "receive_count": "receive_max_messages"}  # old -> new


@magics_class
class SbMagics(Magics):
    """Service Bus in the notebook. Settings: ``%config SbMagics`` (or [tool.sbnotebook] in pyproject.toml)."""

    peek_max_messages = Int(100, min=1, help="At most this many messages %sb_peek shows by default.").tag(config=True)
    receive_max_messages = Int(10, min=1, help="At most this many messages %sb_receive takes by default.").tag(
        config=True
    )
    max_in_flight = Int(10, min=1, help="Send and settlement operations in flight at once.").tag(config=True)
    wait_seconds = Float(5.0, min=0.0, help="How long %sb_receive waits for the first message.").tag(config=True)
    max_renewal = Float(300.0, min=0.0, help="Seconds a received batch's locks are renewed for while open.").tag(
        config=True
    )
    tail_interval = Float(
        core.TAIL_INTERVAL, min=0.01, help="Seconds between two polls of %sb_tail (each poll is one peek)."
    ).tag(config=True)
    full_tracebacks = Bool(False, help="Show full tracebacks instead of one-line errors.").tag(config=True)
    confirm = Bool(True, help="Ask before destructive actions (receive-and-delete, settling every row).").tag(
        config=True
    )
    websockets = Bool(
        False, help="Dial AMQP over WebSockets (port 443) where port 5671 is blocked, as %sb_connect --websockets."
    ).tag(config=True)

    # Old names kept for one release (docs/names.md): setting one sets its new name and says so once.
    # None by default, so that any value given (even the default's) is seen and passed on.
    peek_count = Int(None, allow_none=True, min=1, help="Deprecated: peek_max_messages.").tag(config=True)
    receive_count = Int(None, allow_none=True, min=1, help="Deprecated: receive_max_messages.").tag(config=True)

    grid = CaselessStrEnum(
        grid_mod.GRID_MODES,
        default_value="auto",
        help="The panels' message lists: 'itables' grids, 'plain' lists, or 'auto' (plain on Databricks). "
        "Panels read it here when they draw a list (widgets/grid.py).",
    ).tag(config=True)

    # Each family module holds its parsers and commands; they are registered here, once.
    sb_connect = line_magic(connect.sb_connect)
    sb_entities = line_magic(entities.sb_entities)
    sb_peek = line_magic(peek.sb_peek)
    sb_browse = line_magic(peek.sb_browse)
    sb_receive = line_magic(receive.sb_receive)
    sb_settle = line_magic(receive.sb_settle)
    sb_send = line_cell_magic(send.sb_send)
    sb_compose = line_magic(send.sb_compose)
    sb_dlq = line_magic(dlq.sb_dlq)
    sb_stats = line_magic(stats.sb_stats)
    sb_sessions = line_magic(sessions.sb_sessions)
    sb_session_state = line_magic(sessions.sb_session_state)
    sb_purge = line_magic(purge.sb_purge)
    sb_cancel_scheduled = line_magic(purge.sb_cancel_scheduled)
    sb_export = line_magic(files.sb_export)
    sb_import = line_magic(files.sb_import)
    sb_resubmit = line_magic(resubmit.sb_resubmit)
    sb_copy = line_magic(copying.sb_copy)
    sb_tail = line_magic(tail.sb_tail)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        # Read first: an unknown setting fails loading before this object joins the shell's configurables.
        settings = project_settings(type(self).class_trait_names(config=True), old=RENAMED_SETTINGS)
        super().__init__(shell=shell, **kwargs)
        explicit = {RENAMED_SETTINGS.get(name, name) for name in self.config.get("SbMagics", {})}
        for name, value in settings.items():
            new = RENAMED_SETTINGS.get(name)
            if new is not None:
                deprecated(f"{name.replace('_', '-')} in [tool.sbnotebook]", new.replace("_", "-"))
                name = new
            if name not in explicit:
                setattr(self, name, value)
        self.connection: LiveConnection | None = None  # from %sb_connect; every command and panel uses it
        self.connections: dict[str, LiveConnection] = {}  # from %sb_connect --as NAME: NAME:ENTITY
        self.bound: LiveConnection | None = None  # a command's NAME:ENTITY connection, while it runs
        self.bound_name: str | None = None  # ... and that NAME (its lines say NAME:ENTITY)
        self.completer: NameCache | None = None  # Tab completion, once %load_ext installed it
        self.connect_failed: str | None = None  # why the last %sb_connect failed: commands fail until one works
        self.batches: list[LockedBatch] = []
        self.samples: dict[str, list[tuple[dt.datetime, core.EntityCounts]]] = {}
        self.sdk_logs = SdkLogSummary()
        self.sdk_logs.install(show=self.full_tracebacks)
        self.observe(lambda change: self.sdk_logs.install(show=change["new"]), names="full_tracebacks")

    @observe(*RENAMED_SETTINGS)
    def _renamed_setting(self, change: Any) -> None:
        if change["new"] is not None:
            new = RENAMED_SETTINGS[change["name"]]
            deprecated(f"SbMagics.{change['name']}", f"SbMagics.{new}")
            setattr(self, new, change["new"])

    def fail(self, exc: BaseException) -> NoReturn:
        """Fail the command and its cell with ``exc`` in one line (command.py)."""
        fail(exc)

    def conn(self) -> LiveConnection:
        """The live connection every command passes on (the first command connects if needed): the
        named one while a command on ``NAME:ENTITY`` runs. After a failed %sb_connect there is none:
        a Run All meant for a real namespace must not go on against another one (the previous, or
        the embedded emulator)."""
        if self.bound is not None:
            return self.bound
        if self.connection is None:
            if self.connect_failed is not None:
                raise UsageError(
                    f"Not connected: the last %sb_connect failed ({self.connect_failed}). "
                    "Run %sb_connect again (%sb_connect --emulator for the embedded emulator)."
                )
            self.connection = core.connect(websockets=self.websockets)
            if self.connection.is_emulator:
                print(
                    f"Using the embedded Service Bus emulator at {self.connection.namespace} (%sb_connect to change)."
                )
        return self.connection

    def named(self, name: str) -> LiveConnection:
        """The connection ``%sb_connect --as NAME`` named."""
        found = self.connections.get(name)
        if found is None:
            known = ", ".join(sorted(self.connections)) or "none yet"
            raise UsageError(
                f"No connection named {name!r} (named: {known}): %sb_connect --as {name} CONNECTION adds it; "
                "%sb_connect --list shows them."
            )
        return found

    def ask(self, question: str, expected: str) -> None:
        """Destructive actions need the expected word typed back (or --yes, or confirm=False)."""
        if not self.confirm:
            return
        try:
            answer = input(f"{question} Type '{expected}' to go on: ")
        except (StdinNotImplementedError, EOFError):  # a job, nbclient: nobody to ask
            raise Declined(
                f"nothing done: this needs '{expected}' typed, and input is not available here: "
                "repeat the command with --yes."
            ) from None
        if answer.strip().lower() != expected:
            raise Declined(f"nothing done: '{expected}' was not typed (--yes skips the question).")

    def batch(self, name: str | None) -> LockedBatch:
        """The locked batch a command settles: the variable NAME holds, else the last one received."""
        if name is not None:
            value = self.shell.user_ns.get(name) if self.shell is not None else None
            if not isinstance(value, LockedBatch):
                raise UsageError(f"{name!r} is not a variable holding a locked batch from %sb_receive.")
            return value
        if not self.batches:
            raise UsageError("No locked batch yet: receive one with %sb_receive ENTITY.")
        return self.batches[-1]
