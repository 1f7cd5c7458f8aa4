"""%sb_sessions and %sb_session_state: the sessions of a session-enabled entity, and their state."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from ...core import SessionInfo, pretty_state
from .command import COUNT, command, parser, whole
from .targets import shown
from .times import add_time

if TYPE_CHECKING:
    from .state import MagicsState

SESSIONS = parser(
    "sb_sessions",
    "The sessions of a session-enabled queue or subscription (those with messages or state): message\n"
    "count, state preview, and whether another receiver holds the session. Each session is accepted for\n"
    "a moment to look (nothing is received); --ids-only skips that.",
    "  %sb_sessions orders-by-customer\n"
    "  df = %sb_sessions events/subscriptions/audit --max-sessions 500 --ids-only\n"
    "  %sb_sessions orders-by-customer --updated-after 1h      # state set in the last hour\n"
    "  %sb_sessions orders-by-customer --panel                 # list, view and edit state",
)
SESSIONS.add_argument("entity", help="a session-enabled queue or topic/subscriptions/name")
SESSIONS.add_argument("--max-sessions", type=COUNT, default=core.MAX_SESSIONS, help="at most this many sessions")
SESSIONS.add_argument("--ids-only", action="store_true", help="only the ids: no state, count or lock status")
SESSIONS.add_argument(
    "--max-counted", type=whole(0), default=core.PAGE_SIZE, help="count each session's messages up to this many"
)
add_time(SESSIONS, "--updated-after", "only sessions whose state was set after WHEN")
SESSIONS.add_argument("--panel", action="store_true", help="the sessions panel: list, peek, view and edit state")
SESSIONS.rename("-n", "--max-sessions")  # -n is at most N messages wherever it is (docs/names.md)
SESSIONS.rename("--count-limit", "--max-counted")

SESSION_STATE = parser(
    "sb_session_state",
    "Show a session's state, or replace it (--set, --text) or clear it (--clear): shows old and new and\n"
    "asks first. Another receiver holding the session makes it fail in one line.",
    "  %sb_session_state orders-by-customer c-7\n"
    "  %sb_session_state orders-by-customer c-7 --set '{\"step\": 3}'\n"
    "  %sb_session_state orders-by-customer c-7 --text checkpoint-41 --yes\n"
    "  %sb_session_state orders-by-customer c-7 --clear",
)
SESSION_STATE.add_argument("entity", help="a session-enabled queue or topic/subscriptions/name")
SESSION_STATE.add_argument("session", help="the session id")
SESSION_STATE.add_argument("--set", metavar="JSON", dest="set_json", help="replace the state with this JSON")
SESSION_STATE.add_argument("--text", help="replace the state with this text, as it is")
SESSION_STATE.add_argument("--clear", action="store_true", help="remove the state")
SESSION_STATE.add_argument("--yes", action="store_true", help="do not ask before replacing or clearing")


def sessions_frame(found: list[SessionInfo], preview: int = 80) -> Any:
    import pandas as pd

    columns = ["session_id", "locked", "messages", "more", "last_enqueued", "state"]
    rows = [
        {
            "session_id": s.session_id,
            "locked": s.locked,
            "messages": s.messages,
            "more": s.more,
            "last_enqueued": s.last_enqueued,
            "state": None if s.state_text is None else s.state_text[:preview],
        }
        for s in found
    ]
    return pd.DataFrame(rows, columns=columns)


@command(SESSIONS)
def sb_sessions(self: MagicsState, args: argparse.Namespace) -> Any:
    after = core.parse_time(args.updated_after, name="--updated-after") if args.updated_after else None
    if args.panel:
        from ..widgets.sessions import SessionsPanel

        return SessionsPanel(args.entity, connection=self.conn(), max_sessions=args.max_sessions, updated_after=after)
    found = core.list_sessions(
        args.entity,
        updated_after=after,
        max_sessions=args.max_sessions,
        details=not args.ids_only,
        max_counted=args.max_counted,
        connection=self.conn(),
    )
    held = sum(s.locked for s in found)
    text = f"{len(found)} sessions in {shown(self, args.entity)}"
    if held:
        text += f", {held} held by another receiver (state and count unknown)"
    if len(found) >= args.max_sessions:
        text += f"; stopped at --max-sessions {args.max_sessions}"
    print(text + ".")
    frame = sessions_frame(found)
    return frame[["session_id"]] if args.ids_only else frame


def state_value(args: argparse.Namespace) -> tuple[bool, str | None]:
    """(is this a change, the new state) from --set, --text or --clear."""
    given = [x for x in (args.set_json is not None, args.text is not None, args.clear) if x]
    if len(given) > 1:
        raise UsageError("%sb_session_state: give one of --set, --text or --clear.")
    if args.set_json is not None:
        try:
            json.loads(args.set_json)
        except ValueError as exc:
            raise UsageError(f"--set takes JSON ({exc}); for plain text use --text.") from None
        return True, args.set_json
    if args.text is not None:
        return True, args.text
    return bool(args.clear), None


@command(SESSION_STATE)
def sb_session_state(self: MagicsState, args: argparse.Namespace) -> Any:
    change, new = state_value(args)
    current = core.get_session_state(args.entity, args.session, connection=self.conn())
    if not change:
        if current is None:
            print(f"Session {args.session} of {shown(self, args.entity)} has no state.")
            return None
        print(pretty_state(current))
        return None
    if not args.yes:
        print(f"Session {args.session} of {shown(self, args.entity)}:\n- now:   {pretty_state(current)}")
        print(f"- after: {pretty_state(None if new is None else new.encode('utf-8'))}")
        self.ask("Replace the session's state?", "yes")
    core.set_session_state(args.entity, args.session, new, connection=self.conn())
    print(f"Session {args.session} of {shown(self, args.entity)}: state {'cleared' if new is None else 'replaced'}.")
    return None
