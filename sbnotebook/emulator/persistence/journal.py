"""On-disk durability for ``--data-dir``: what a restart must keep survives a SIGKILL.

Kept: every accepted message and each change to it, session state, each entity's
last sequence number, the entities themselves as created, updated or deleted
through the administration API (with their properties and rules), when the
topology file's own entities were first made, and the
duplicate-detection history. Not kept: locks (a restarted broker has released
them, as Service Bus does when a lock's holder is gone).

Changes are collected as the broker works and written in one SQLite transaction
before the operation that caused them is acknowledged. WAL mode with
``synchronous=NORMAL`` survives the broker process dying at any point (the
committed WAL is in the OS's hands); surviving power loss would need FULL.

Rows hold JSON and AMQP-encoded bytes only (see ``rows.py``): opening a data
directory cannot run code.

Compaction (``compact``): every live message is written to ``snapshot.bin`` (``snapshot.py``:
one JSON index and the messages' encoded sections back to back, read in one pass at start-up)
and the ``messages`` table then holds only the tail, the changes since: rows written after the
snapshot, and ``tombstones`` for snapshot messages deleted since. A start-up loads the snapshot,
drops what the tail deleted and lets the tail's rows replace the snapshot's. A crash at any point
of a compaction loses nothing: the new snapshot replaces the old one by an atomic rename, written
right after a flush, so it equals snapshot + tail at that moment, and applying the old tail over
it again changes nothing; the tail is cleared only after the rename.
"""

from __future__ import annotations

import heapq
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..broker.model import StoredMessage
from . import snapshot
from .recording import deleted_paths, entity_row
from .rows import MessageRow, message_from_row, message_row, parse_entity_doc

if TYPE_CHECKING:
    from ..broker.entities import Entity, Subscription

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    store TEXT NOT NULL,
    seq INTEGER NOT NULL,
    meta TEXT NOT NULL,
    raw_properties BLOB NOT NULL,
    raw_application_properties BLOB NOT NULL,
    raw_body BLOB NOT NULL,
    raw_delivery_annotations BLOB NOT NULL,
    annotations BLOB NOT NULL,
    sent_application_properties BLOB NOT NULL,
    application_properties BLOB NOT NULL,
    PRIMARY KEY (store, seq)
);
CREATE TABLE IF NOT EXISTS session_state (
    store TEXT NOT NULL,
    session TEXT NOT NULL,
    state BLOB,
    PRIMARY KEY (store, session)
);
CREATE TABLE IF NOT EXISTS entities (
    path TEXT PRIMARY KEY,   -- lower case: queue, topic, or topic/subscriptions/sub
    doc TEXT                 -- JSON definition; NULL = deleted (a topology entity stays deleted)
);
CREATE TABLE IF NOT EXISTS duplicates (
    entity TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seen REAL NOT NULL,
    PRIMARY KEY (entity, message_id)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tombstones (
    store TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (store, seq)
) WITHOUT ROWID;
"""


COMPACT_MIN_ROWS = 10_000


class JournalError(RuntimeError):
    """The data directory cannot be used (another format, or damaged)."""


class Journal:
    """The data directory's store, and the broker's ``Recorder`` (``broker/recorder.py``): the
    broker notes its changes here, ``flush`` writes them."""

    def __init__(self, data_dir: str | Path) -> None:
        path = Path(data_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / "broker.sqlite3"
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._check_format()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
        self._upserts: dict[tuple[str, int], StoredMessage] = {}
        self._deletes: set[tuple[str, int]] = set()
        self._states: dict[tuple[str, str], bytes | None] = {}
        self._sequences: dict[str, int] = {}  # entity -> last sequence number handed out
        self._entities: dict[str, str | None] = {}  # path -> JSON doc, None = deleted
        self._seen: dict[tuple[str, str], float] = {}  # (entity, message id) -> when first seen
        self._forget_seen: set[str] = set()  # entities whose history ends (deleted)
        self.snapshot_path = path / snapshot.FILE_NAME
        snapshot.remove_partial(path)  # a compaction killed before its rename left it
        # Rows in the tail (messages + tombstones) since the last compaction: what a start-up
        # decodes row by row. ``compact_if_large`` compares it with the live messages.
        self.tail_rows = int(
            self._db.execute("SELECT (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM tombstones)").fetchone()[0]
        )

    def _check_format(self) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "messages" not in tables:
            return
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(messages)")}
        if "row" in columns:
            raise JournalError(
                f"{self.path} was written by an older emulator (pickled rows, which this version never "
                "loads: they could run code). Move it away or use another --data-dir."
            )

    # ---------------------------------------------------------------- writes

    def put(self, store: str, msg: StoredMessage) -> None:
        key = (store.lower(), msg.sequence_number)
        self._deletes.discard(key)
        self._upserts[key] = msg

    def delete(self, store: str, seq: int) -> None:
        key = (store.lower(), seq)
        self._upserts.pop(key, None)
        self._deletes.add(key)

    def session_state(self, store: str, session: str, state: bytes | None) -> None:
        self._states[(store.lower(), session)] = state

    def note_sequence(self, entity: str, seq: int) -> None:
        self._sequences[entity.lower()] = seq

    def entity(self, path: str, doc: str) -> None:
        """An entity was created or changed (``doc`` from ``rows.entity_doc``)."""
        self._entities[path.lower()] = doc

    def entity_deleted(self, path: str) -> None:
        key = path.lower()
        self._entities[key] = None
        if "/" not in key:  # a queue or topic: its numbering and duplicate history end with it
            self._sequences[key] = 0
            self._forget_seen.add(key)
            self._seen = {k: v for k, v in self._seen.items() if k[0] != key}

    def record(self, entity: Entity | Subscription) -> None:
        """The broker's ``Recorder``: an entity created or changed, noted as a row (``recording.py``)."""
        self.entity(*entity_row(entity))

    def record_deleted(self, entity: Entity | Subscription) -> None:
        for path in deleted_paths(entity):
            self.entity_deleted(path)

    def duplicate_seen(self, entity: str, message_id: str, when: float) -> None:
        self._seen[(entity.lower(), message_id)] = when

    @property
    def dirty(self) -> bool:
        return bool(
            self._upserts
            or self._deletes
            or self._states
            or self._sequences
            or self._entities
            or self._seen
            or self._forget_seen
        )

    def flush(self) -> None:
        if not self.dirty:
            return
        db = self._db
        db.execute("BEGIN")
        try:
            if self._entities:
                db.executemany(
                    "INSERT OR REPLACE INTO entities (path, doc) VALUES (?, ?)", list(self._entities.items())
                )
            if self._deletes:
                deletes = list(self._deletes)
                db.executemany("DELETE FROM messages WHERE store = ? AND seq = ?", deletes)
                if self.snapshot_path.exists():  # the snapshot may hold it: say it is gone
                    db.executemany("INSERT OR IGNORE INTO tombstones (store, seq) VALUES (?, ?)", deletes)
            if self._upserts:
                rows: list[tuple[Any, ...]] = [
                    (store, seq, *message_row(msg)) for (store, seq), msg in self._upserts.items()
                ]
                db.executemany("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            if self._states:
                db.executemany(
                    "INSERT OR REPLACE INTO session_state (store, session, state) VALUES (?, ?, ?)",
                    [(store, session, state) for (store, session), state in self._states.items()],
                )
            if self._sequences:
                db.executemany(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    [(f"seq:{entity}", seq) for entity, seq in self._sequences.items()],
                )
            if self._forget_seen:
                db.executemany("DELETE FROM duplicates WHERE entity = ?", [(e,) for e in self._forget_seen])
            if self._seen:
                db.executemany(
                    "INSERT OR REPLACE INTO duplicates (entity, message_id, seen) VALUES (?, ?, ?)",
                    [(entity, mid, when) for (entity, mid), when in self._seen.items()],
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.tail_rows += len(self._upserts) + len(self._deletes)
        self._upserts.clear()
        self._deletes.clear()
        self._states.clear()
        self._sequences.clear()
        self._entities.clear()
        self._seen.clear()
        self._forget_seen.clear()

    def prune_duplicates(self, entity: str, before: float) -> None:
        """Forget message ids seen before ``before`` (outside the detection window)."""
        self._db.execute("DELETE FROM duplicates WHERE entity = ? AND seen < ?", (entity.lower(), before))

    # ----------------------------------------------------------------- reads

    def sequences(self) -> dict[str, int]:
        """entity (lower case) -> the last sequence number it handed out."""
        rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'seq:%'")
        return {key[4:]: int(value) for key, value in rows}

    def messages(self) -> Iterator[tuple[str, StoredMessage]]:
        """Every stored message, ordered by store and sequence number: the snapshot's (minus what
        the tail deleted or rewrote) merged with the tail's rows."""
        tail = self._tail()
        if not self.snapshot_path.exists():
            yield from tail
            return
        gone = set(self._db.execute("SELECT store, seq FROM tombstones"))
        gone.update(self._db.execute("SELECT store, seq FROM messages"))
        if not gone:  # no tail (a compaction at stop cleared it): the snapshot alone, no merge
            yield from snapshot.read(self.snapshot_path)
            return
        kept = (item for item in snapshot.read(self.snapshot_path) if (item[0], item[1].sequence_number) not in gone)
        yield from heapq.merge(kept, tail, key=lambda item: (item[0], item[1].sequence_number))

    def _tail(self) -> Iterator[tuple[str, StoredMessage]]:
        for store, seq, *row in self._db.execute("SELECT * FROM messages ORDER BY store, seq"):
            yield store, message_from_row(int(seq), tuple(row))

    # ------------------------------------------------------------- compaction

    def compact(self, stores: Iterable[tuple[str, Iterable[StoredMessage]]]) -> int:
        """Write every live message (``stores``: (store path, its messages), as the broker holds
        them now) to a new snapshot and clear the tail. Flushes first, so that the snapshot equals
        what is on disk. Returns the number of messages written."""
        self.flush()
        written = snapshot.write(self.snapshot_path, ((name.lower(), msgs) for name, msgs in stores))
        snapshot.pause_for_tests("after-rename")
        db = self._db
        db.execute("BEGIN")
        try:
            db.execute("DELETE FROM messages")
            db.execute("DELETE FROM tombstones")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.tail_rows = 0
        return written

    def should_compact(self, live: int) -> bool:
        """Whether the tail is worth folding into a snapshot: at least ``COMPACT_MIN_ROWS`` rows and
        a quarter of the live messages (a start-up decodes the tail row by row, 4-5x slower than
        the snapshot)."""
        least = int(os.environ.get("SBNOTEBOOK_COMPACT_MIN_ROWS", COMPACT_MIN_ROWS))  # tests set it low
        return self.tail_rows >= max(least, 1) and self.tail_rows * 4 >= live

    def session_states(self) -> Iterator[tuple[str, str, bytes | None]]:
        yield from self._db.execute("SELECT store, session, state FROM session_state")

    def births(self) -> dict[str, int]:
        """Path (lower case) -> when the topology file's entity was first made, in microseconds
        since the epoch (``keep_births``)."""
        rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'born:%'")
        return {key[5:]: int(value) for key, value in rows}

    def keep_births(self, births: dict[str, int]) -> None:
        """Replace the kept creation times with ``births`` (the topology's entities at this start):
        one that left the topology file is forgotten, so it is new if it comes back."""
        db = self._db
        db.execute("BEGIN")
        try:
            db.execute("DELETE FROM meta WHERE key LIKE 'born:%'")
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)", [(f"born:{path}", us) for path, us in births.items()]
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def entities(self) -> list[tuple[str, dict[str, Any] | None]]:
        """(path, definition or None if deleted), queues and topics before subscriptions."""
        rows = self._db.execute("SELECT path, doc FROM entities").fetchall()
        out = [(path, parse_entity_doc(doc) if doc is not None else None) for path, doc in rows]
        return sorted(out, key=lambda item: item[0].count("/"))

    def duplicates(self) -> Iterator[tuple[str, str, float]]:
        yield from self._db.execute("SELECT entity, message_id, seen FROM duplicates ORDER BY seen")

    def close(self) -> None:
        self.flush()
        self._db.close()


__all__ = ["Journal", "JournalError", "MessageRow"]
