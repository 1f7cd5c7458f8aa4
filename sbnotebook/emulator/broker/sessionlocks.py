"""Session locks and session state: accept, renew, get/set state, list (a part of ``broker.Broker``)."""

from __future__ import annotations

from .brokercore import BrokerCore, locked
from .entities import Source
from .store import SessionState
from .timers import SESSION


class SessionLocks(BrokerCore):
    @locked
    def accept_session(self, source: Source, session_id: str | None, owner: object) -> SessionState | None:
        """Lock a session for ``owner``: the named one, or the next with available messages.
        Returns None when ``session_id`` is None and no session is free (the caller may wait)."""
        session = self.sessions.accept(source, session_id, owner, self.clock.now())
        if session is not None:
            assert session.locked_until is not None
            self.timers.add(session.locked_until, SESSION, (source.entity, source.store, session.id))
        return session

    # ``holder``: the receiver link a management request names (its associated-link-name); the
    # session must be locked by it. None (a request naming no link): locked by any receiver.
    # Service Bus answers session-lock-lost when the lock has lapsed, was lost or is held elsewhere.

    @locked
    def renew_session_lock(self, source: Source, session_id: str, holder: object | None = None) -> float:
        session = self.sessions.renew(source, session_id, holder, self.clock.now())
        assert session.locked_until is not None
        for lock in self.locks.of_session(session):
            msg = lock.store.messages.get(lock.seq)
            if msg is not None:
                msg.locked_until = session.locked_until
        self.timers.add(session.locked_until, SESSION, (source.entity, source.store, session.id))
        return session.locked_until

    @locked
    def session_state(self, source: Source, session_id: str, holder: object | None = None) -> bytes | None:
        return self.sessions.held(source, session_id, holder).state

    @locked
    def set_session_state(
        self, source: Source, session_id: str, state: bytes | None, holder: object | None = None
    ) -> None:
        self.sessions.held(source, session_id, holder)
        store = self.sessions.set_state(source, session_id, state, self.clock.now())
        if self.journal is not None:
            self.journal.session_state(store.path, session_id, state)

    @locked
    def list_sessions(self, source: Source, updated_after: float | None = None) -> list[str]:
        """Sessions with active messages or stored state (or state updated after a time)."""
        return self.sessions.listing(source, updated_after)
