"""The SbMagics class: the settings (settings.py) and the state commands share (live connection,
batches, samples; declared in state.py) put together, and the registration of every command
family's magics."""

from __future__ import annotations

from typing import Any, NoReturn

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from ... import core
from ...core import LiveConnection, LockedBatch, deprecated
from ..config import project_settings
from . import (
    connect,
    copying,
    discard,
    dlq,
    entities,
    files,
    journeys,
    peek,
    playbook,
    purge,
    receive,
    resubmit,
    route,
    send,
    sessions,
    stats,
    tail,
    topology,
)
from .command import Declined, fail
from .sdklogs import SdkLogSummary
from .settings import RENAMED_SETTINGS
from .state import MagicsState


@magics_class
class SbMagics(Magics, MagicsState):
    """Service Bus in the notebook. Settings: ``%config SbMagics`` (or [tool.sbnotebook] in pyproject.toml)."""

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
    sb_discard = line_magic(discard.sb_discard)
    sb_copy = line_magic(copying.sb_copy)
    sb_tail = line_magic(tail.sb_tail)
    sb_topology = line_magic(topology.sb_topology)
    sb_route = line_cell_magic(route.sb_route)
    sb_trace = line_magic(journeys.sb_trace)
    sb_playbook = line_magic(playbook.sb_playbook)

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
        # The shared state, declared in state.py (MagicsState).
        self.connection = None
        self.connections = {}
        self.bound = None
        self.bound_name = None
        self.completer = None
        self.connect_failed = None
        self.batches = []
        self.samples = {}
        self.sdk_logs = SdkLogSummary()
        self.sdk_logs.install(show=self.full_tracebacks)
        self.observe(lambda change: self.sdk_logs.install(show=change["new"]), names="full_tracebacks")

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
                    f"Using the embedded Service Bus emulator at {self.connection.fully_qualified_namespace} "
                    "(%sb_connect to change)."
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
