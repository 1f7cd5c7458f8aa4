"""What the broker tells whoever keeps its state (``--data-dir``), as it changes.

The broker defines the interface and calls it; ``persistence.journal.Journal`` implements it. So the
broker never imports the persistence layer above it: without ``--data-dir`` it has no recorder at all.
Each operation's changes are flushed under the broker's lock before the operation is acknowledged
(``brokercore.locked``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .entities import Entity, Subscription
    from .model import StoredMessage


class Recorder(Protocol):
    """The broker's changes, noted as they happen and kept by ``flush``."""

    @property
    def dirty(self) -> bool:
        """Changes noted and not yet flushed."""
        ...

    def flush(self) -> None:
        """Keep what was noted (durably) before the broker acknowledges the operation."""

    def put(self, store: str, msg: StoredMessage) -> None:
        """A message stored, or changed, in ``store`` (an entity's path, or its dead-letter queue's)."""

    def delete(self, store: str, seq: int) -> None:
        """The message numbered ``seq`` left ``store``."""

    def session_state(self, store: str, session: str, state: bytes | None) -> None: ...

    def note_sequence(self, entity: str, seq: int) -> None:
        """The last sequence number a queue or topic handed out."""

    def duplicate_seen(self, entity: str, message_id: str, when: float) -> None: ...

    def prune_duplicates(self, entity: str, before: float) -> None:
        """Forget message ids first seen before ``before`` (out of the duplicate-detection window)."""

    def record(self, entity: Entity | Subscription) -> None:
        """An entity's definition, created or changed (properties, rules, policies)."""

    def record_deleted(self, entity: Entity | Subscription) -> None:
        """An entity deleted (a topic with its subscriptions)."""


def record(recorder: Recorder | None, entity: Entity | Subscription) -> None:
    """Note an entity's definition, when the broker has a recorder."""
    if recorder is not None:
        recorder.record(entity)


def record_deleted(recorder: Recorder | None, entity: Entity | Subscription) -> None:
    if recorder is not None:
        recorder.record_deleted(entity)
