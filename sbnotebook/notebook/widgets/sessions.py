"""Sessions panel: the sessions of a session-enabled entity; peek one, view and edit its state.

Replacing or clearing a state shows the old and new state next to the button and waits for Confirm.
"""

from __future__ import annotations

import datetime as dt
import html
import json

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, InvalidInputError, SessionInfo, live_connection, pretty_state, renamed
from .confirm import ConfirmRow, Pending
from .render import guard


def _label(s: SessionInfo) -> str:
    if s.locked:
        return f"{s.session_id} · held by another receiver"
    count = "?" if s.messages is None else f"{s.messages}{'+' if s.more else ''}"
    state = "no state" if s.state_text is None else f"state: {s.state_text[:60]}"
    return f"{s.session_id} · {count} messages · {state}"


class SessionsPanel(W.VBox):
    """The sessions of a session-enabled ``entity`` (at most ``max_sessions``; ``updated_after``: those
    whose state was set after that time): peek one's messages (at most ``max_messages``), view and edit
    its state, each change confirmed first."""

    @renamed(limit="max_sessions", peek_count="max_messages")
    def __init__(
        self,
        entity: str,
        *,
        connection: ConnectionLike = None,
        max_sessions: int = core.MAX_SESSIONS,
        updated_after: str | dt.datetime | dt.timedelta | None = None,
        max_messages: int = 50,
    ) -> None:
        """At most ``max_sessions`` sessions listed, at most ``max_messages`` of one peeked (Peek);
        with ``updated_after`` (a time in core's grammar: ``2h``, ISO 8601, a datetime; taken once,
        here), only the sessions whose state was set after it."""
        self.connection = live_connection(connection)
        self.entity = entity
        self.max_sessions = max_sessions
        self.updated_after = None if updated_after is None else core.parse_time(updated_after, name="updated_after")
        self.max_messages = max_messages
        self.sessions: list[SessionInfo] = []
        self.status = W.HTML()
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.list = W.Select(options=[], rows=8, layout=W.Layout(width="100%"))
        self.state = W.Textarea(placeholder="session state (JSON or text)", rows=5, layout=W.Layout(width="100%"))
        self.save_button = W.Button(description="Save state…", button_style="warning")
        self.clear_button = W.Button(description="Clear state…", button_style="danger")
        self.peek_button = W.Button(description="Peek messages")
        self.confirm_row = ConfirmRow(typed=False, button_style="warning")
        self.messages = W.HTML(layout=W.Layout(max_width="100%", overflow="auto"))
        self.refresh_button.on_click(guard(self.status, self.refresh))
        self.save_button.on_click(guard(self.status, self.ask_save))
        self.clear_button.on_click(guard(self.status, self.ask_clear))
        self.peek_button.on_click(guard(self.status, self.peek))
        self.confirm_row.confirm_button.on_click(guard(self.status, self.confirm))
        self.confirm_row.cancel_button.on_click(guard(self.status, self.cancel))
        self.list.observe(lambda _: guard(self.status, self.show)(), names="value")
        super().__init__(
            [
                W.HBox([W.HTML(f"<b>Sessions of {html.escape(entity)}</b>"), self.refresh_button]),
                self.status,
                self.list,
                self.state,
                W.HBox([self.save_button, self.clear_button, self.peek_button]),
                self.confirm_row,
                self.messages,
            ],
            layout=W.Layout(max_width="100%"),
        )
        guard(self.status, self.refresh)()

    @property
    def selected(self) -> str | None:
        value = self.list.value
        return str(value) if value is not None else None

    def refresh(self) -> None:
        """List the sessions again."""
        self.cancel()
        self.sessions = core.list_sessions(
            self.entity, updated_after=self.updated_after, max_sessions=self.max_sessions, connection=self.connection
        )
        keep = self.selected
        self.list.options = [(_label(s), s.session_id) for s in self.sessions]
        ids = [s.session_id for s in self.sessions]
        self.list.value = keep if keep in ids else (ids[0] if ids else None)
        held = sum(s.locked for s in self.sessions)
        self.status.value = f"{len(self.sessions)} sessions" + (f", {held} held by another receiver" if held else "")
        self.show()

    def show(self) -> None:
        """The selected session's state in the editor (as the listing found it)."""
        self.cancel()
        self.messages.value = ""
        session = next((s for s in self.sessions if s.session_id == self.selected), None)
        self.state.value = pretty_state(session.state) if session is not None and session.state else ""
        self.state.disabled = session is None or session.locked

    def _need_session(self) -> str:
        if self.selected is None:
            raise InvalidInputError("Select a session first.")
        return self.selected

    def ask_save(self) -> None:
        """Ask to save the editor's text as the selected session's state (JSON is checked), showing it
        now and after."""
        session_id = self._need_session()
        new = self.state.value.strip()
        if not new:
            raise InvalidInputError("The state is empty: use Clear state… to remove it.")
        if new[:1] in "{[":
            try:
                json.loads(new)
            except ValueError as exc:
                raise InvalidInputError(f"The state looks like JSON but is not valid ({exc}); nothing saved.") from None
        self._ask(session_id, new)

    def ask_clear(self) -> None:
        """Ask to clear the selected session's state, showing it now and after."""
        self._ask(self._need_session(), "")

    @property
    def pending(self) -> Pending | None:
        return self.confirm_row.pending

    def _ask(self, session_id: str, new: str) -> None:
        """Show the old and new state; the session asked about is the one Confirm changes."""
        current = core.get_session_state(self.entity, session_id, connection=self.connection)
        after = html.escape(new) if new else "(no state)"
        self.confirm_row.ask(
            f"Session <b>{html.escape(session_id)}</b>: now <code>{html.escape(pretty_state(current))}"
            f"</code> → after <code>{after}</code>",
            Pending(lambda: self._save(session_id, new)),
        )

    def confirm(self) -> None:
        """Make the change asked about."""
        self.confirm_row.take()()

    def _save(self, session_id: str, new: str) -> None:
        core.set_session_state(self.entity, session_id, new or None, connection=self.connection)
        self.refresh()
        self.status.value = f"Session {html.escape(session_id)}: state {'replaced' if new else 'cleared'}."

    def cancel(self) -> None:
        """Drop the question asked, if any: nothing changes."""
        self.confirm_row.cancel()

    def peek(self) -> None:
        """The selected session's messages (peeked: nothing is locked or counted)."""
        session_id = self._need_session()
        page = core.peek(self.entity, max_messages=self.max_messages, session_id=session_id, connection=self.connection)
        frame = page.to_pandas()
        shown = frame[["sequence_number", "state", "subject", "enqueued_time", "body_text"]].copy()
        shown["body_text"] = shown["body_text"].map(lambda text: None if text is None else str(text)[:120])
        title = f"<b>{len(frame)} messages in session {html.escape(session_id)}</b>"
        self.messages.value = title + shown.to_html(index=False)
