"""One message log (a queue, a subscription, or a dead-letter sub-queue).

Messages are kept by sequence number. Peek pages by sequence number in
O(log n + page); taking the next available message is O(log n); counts by
state are kept as messages come, go and change state (O(1) to read).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from typing import Any

from .model import MessageState, StoredMessage


class SessionState:
    """One session of a session-enabled entity: its own queue of available messages, its lock, its state."""

    __slots__ = ("available", "id", "locked_until", "owner", "state", "state_updated")

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.available: list[int] = []
        self.owner: object | None = None
        self.locked_until: float | None = None
        self.state: bytes | None = None
        self.state_updated: float = 0.0


class MessageStore:
    def __init__(self, path: str, *, is_dead_letter: bool = False, sessions: bool = False) -> None:
        self.path = path
        self.is_dead_letter = is_dead_letter
        self.sessions: dict[str, SessionState] | None = {} if sessions else None
        self.journal: Any = None  # the broker's Recorder (recorder.py) when it persists (--data-dir)
        self.messages: dict[int, StoredMessage] = {}
        self._order: list[int] = []  # sorted sequence numbers, with lazily removed entries
        self._stale = 0
        self._available: list[int] = []  # heap of sequence numbers that may be available
        self.size_bytes = 0
        self._counts = [0, 0, 0]  # by MessageState value: active, deferred, scheduled

    def __len__(self) -> int:
        return len(self.messages)

    def add(self, msg: StoredMessage) -> None:
        seq = msg.sequence_number
        if seq in self.messages:
            raise ValueError(f"{self.path}: sequence number {seq} already present")
        self.messages[seq] = msg
        self.size_bytes += msg.data.size
        self._counts[msg.state] += 1
        if self.journal is not None:
            self.journal.put(self.path, msg)
        order = self._order
        if not order or seq > order[-1]:
            order.append(seq)
        else:
            i = bisect.bisect_left(order, seq)
            if i < len(order) and order[i] == seq:
                self._stale -= 1  # re-added under the same number: reuse the removed entry
            else:
                order.insert(i, seq)
        if msg.state is MessageState.ACTIVE and not msg.locked:
            heapq.heappush(self._heap_for(msg), seq)

    def remove(self, seq: int) -> StoredMessage:
        msg = self.messages.pop(seq)
        self.size_bytes -= msg.data.size
        self._counts[msg.state] -= 1
        if self.journal is not None:
            self.journal.delete(self.path, seq)
        self._stale += 1
        if self._stale > 1024 and self._stale > len(self._order) // 2:
            self._order = [s for s in self._order if s in self.messages]
            self._stale = 0
        return msg

    def set_state(self, msg: StoredMessage, state: MessageState) -> None:
        """Change the state of a message this store holds (kept in its counts) and persist it."""
        self._counts[msg.state] -= 1
        self._counts[state] += 1
        msg.state = state
        self.touch(msg)

    def touch(self, msg: StoredMessage) -> None:
        """A stored message changed (state, delivery count, properties): persist it."""
        if self.journal is not None and msg.sequence_number in self.messages:
            self.journal.put(self.path, msg)

    def session(self, session_id: str) -> SessionState:
        assert self.sessions is not None
        found = self.sessions.get(session_id)
        if found is None:
            found = self.sessions[session_id] = SessionState(session_id)
        return found

    def _heap_for(self, msg: StoredMessage) -> list[int]:
        if self.sessions is not None and msg.data.session_id is not None:
            return self.session(msg.data.session_id).available
        return self._available

    def mark_available(self, msg: StoredMessage) -> None:
        """Call after a message became active and unlocked."""
        heapq.heappush(self._heap_for(msg), msg.sequence_number)

    def take_available(self, session_id: str | None = None) -> StoredMessage | None:
        """Lowest-sequence message that is active and unlocked (within a session, if given), or None."""
        heap = self.session(session_id).available if session_id is not None else self._available
        while heap:
            seq = heapq.heappop(heap)
            msg = self.messages.get(seq)
            if msg is not None and msg.state is MessageState.ACTIVE and not msg.locked:
                return msg
        return None

    def has_available(self, session_id: str | None = None) -> bool:
        heap = self.session(session_id).available if session_id is not None else self._available
        while heap:
            msg = self.messages.get(heap[0])
            if msg is not None and msg.state is MessageState.ACTIVE and not msg.locked:
                return True
            heapq.heappop(heap)
        return False

    def iter_from(self, from_seq: int) -> Iterator[StoredMessage]:
        order = self._order
        i = bisect.bisect_left(order, from_seq)
        gone = i
        while gone < len(order) and order[gone] not in self.messages:
            gone += 1
        if gone - i > 64:
            # A run of removed entries (a purge or a drain takes the oldest first): drop it now,
            # so that every later peek from here does not step over it again.
            del order[i:gone]
            self._stale -= gone - i
        while i < len(order):
            msg = self.messages.get(order[i])
            i += 1
            if msg is not None:
                yield msg

    def count(self, state: MessageState) -> int:
        return self._counts[state]

    def take_for_deletion(
        self, count: int, before: float, session_id: str | None = None, *, skip_session: Any = None
    ) -> list[StoredMessage]:
        """Up to ``count`` of the oldest messages a batch delete may remove: active, not locked,
        enqueued before ``before``; within one session if given. On a session-enabled store
        without a session id: from every session ``skip_session(session)`` does not exclude.
        The caller removes what it gets."""
        if self.sessions is None:
            return self._take_older(self._available, count, before)
        if session_id is not None:
            named = self.sessions.get(session_id)
            return [] if named is None else self._take_older(named.available, count, before)
        out: list[StoredMessage] = []
        for session in list(self.sessions.values()):
            if len(out) >= count:
                break
            if skip_session is not None and skip_session(session):
                continue
            out.extend(self._take_older(session.available, count - len(out), before))
        return out

    def _take_older(self, heap: list[int], count: int, before: float) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        later: list[StoredMessage] = []  # available, but enqueued at or after the cut-off: put back
        while heap and len(out) < count:
            seq = heapq.heappop(heap)
            msg = self.messages.get(seq)
            if msg is None or msg.state is not MessageState.ACTIVE or msg.locked:
                continue  # a stale heap entry (taken, settled or deferred since)
            (out if msg.enqueued_time < before else later).append(msg)
        for seq in (m.sequence_number for m in later):
            heapq.heappush(heap, seq)
        return out
