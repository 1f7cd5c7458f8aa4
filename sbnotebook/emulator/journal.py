"""On-disk durability for ``--data-dir``: what a restart must keep survives a SIGKILL.

Kept: every accepted message and each change to it, session state, each entity's
last sequence number, the entities themselves as created, updated or deleted
through the administration API (with their properties and rules), and the
duplicate-detection history. Not kept: locks (a restarted broker has released
them, as Service Bus does when a lock's holder is gone).

Changes are collected as the broker works and written in one SQLite transaction
before the operation that caused them is acknowledged. WAL mode with
``synchronous=NORMAL`` survives the broker process dying at any point (the
committed WAL is in the OS's hands); surviving power loss would need FULL.

Rows hold JSON and AMQP-encoded bytes only (see ``rows.py``): opening a data
directory cannot run code.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .model import StoredMessage
from .rows import MessageRow, message_from_row, message_row, parse_entity_doc

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
"""


class JournalError(RuntimeError):
    """The data directory cannot be used (another format, or damaged)."""


class Journal:
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
                db.executemany("DELETE FROM messages WHERE store = ? AND seq = ?", list(self._deletes))
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
        for store, seq, *row in self._db.execute("SELECT * FROM messages ORDER BY store, seq"):
            yield store, message_from_row(int(seq), tuple(row))

    def session_states(self) -> Iterator[tuple[str, str, bytes | None]]:
        yield from self._db.execute("SELECT store, session, state FROM session_state")

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
