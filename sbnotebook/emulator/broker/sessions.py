"""Sessions of session-enabled entities: who holds which session until when, and its state.

A session is held by one receiver at a time; its lock lasts the entity's
LockDuration and is renewed as a whole. The locks of the messages delivered in a
session are the session's: the broker ends them when the session lock ends.
"""

from __future__ import annotations

from ..errors import NotAllowed, SessionCannotBeLocked, SessionLockLost
from .entities import Source
from .model import MessageState
from .store import MessageStore, SessionState


def session_store(source: Source) -> MessageStore:
    if source.store.sessions is None:
        raise NotAllowed(
            f"'{source.store.path}' is not session-enabled: use a plain receiver.", entity=source.store.path
        )
    return source.store


class Sessions:
    def __init__(self) -> None:
        self._owned: dict[object, list[SessionState]] = {}  # receiver link -> sessions it holds

    def accept(self, source: Source, session_id: str | None, owner: object, now: float) -> SessionState | None:
        """Lock a session for ``owner``: the named one, or the next with available messages.
        Returns None when ``session_id`` is None and no session is free (the caller may wait)."""
        store = session_store(source)
        assert store.sessions is not None
        if session_id is None:
            best: tuple[int, SessionState] | None = None
            for sess in store.sessions.values():
                if sess.owner is None and store.has_available(sess.id):
                    first = sess.available[0]
                    if best is None or first < best[0]:
                        best = (first, sess)
            if best is None:
                return None
            session = best[1]
        else:
            session = store.session(session_id)
            if session.owner is not None:
                raise SessionCannotBeLocked(
                    f"The requested session '{session_id}' cannot be accepted. It may be locked by another receiver.",
                    entity=store.path,
                )
        session.owner = owner
        session.locked_until = now + source.entity.props.lock_duration
        self._owned.setdefault(owner, []).append(session)
        return session

    @staticmethod
    def held(source: Source, session_id: str, owner: object | None) -> SessionState:
        """The session, if it is locked (by ``owner`` when given), else the error Service Bus answers."""
        store = session_store(source)
        session = store.session(session_id)
        if session.owner is None or (owner is not None and session.owner is not owner):
            raise SessionLockLost(
                f"The session lock for '{session_id}' has expired or is held elsewhere.", entity=store.path
            )
        return session

    @classmethod
    def renew(cls, source: Source, session_id: str, owner: object | None, now: float) -> SessionState:
        session = cls.held(source, session_id, owner)
        session.locked_until = now + source.entity.props.lock_duration
        return session

    def lapsed(self, store: MessageStore, session_id: str, due: float) -> SessionState | None:
        """The session whose lock timer fired, if that lock really ended (not renewed or released)."""
        session = store.session(session_id)
        if session.owner is None or session.locked_until != due:
            return None
        self.lost(session)
        return session

    def lost(self, session: SessionState) -> None:
        """A held session whose lock ended (lapsed, or lost early by a fault): its holder no longer owns it."""
        owned = self._owned.get(session.owner)
        if owned is not None and session in owned:
            owned.remove(session)

    def owner_gone(self, owner: object) -> list[SessionState]:
        """The sessions a receiver held when it went away (the broker releases them)."""
        return self._owned.pop(owner, [])

    @staticmethod
    def released(session: SessionState) -> None:
        session.owner = None
        session.locked_until = None

    @staticmethod
    def set_state(source: Source, session_id: str, state: bytes | None, now: float) -> MessageStore:
        store = session_store(source)
        session = store.session(session_id)
        session.state = state
        session.state_updated = now
        return store

    @staticmethod
    def listing(source: Source, updated_after: float | None = None) -> list[str]:
        """Sessions with active messages or stored state (or state updated after a time)."""
        store = session_store(source)
        assert store.sessions is not None
        active = {m.data.session_id for m in store.messages.values() if m.state is MessageState.ACTIVE}
        out = []
        for sess in store.sessions.values():
            if updated_after is not None:
                if sess.state is not None and sess.state_updated > updated_after:
                    out.append(sess.id)
            elif sess.id in active or sess.state is not None:
                out.append(sess.id)
        return out
