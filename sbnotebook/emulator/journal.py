"""On-disk durability for ``--data-dir``: every accepted message survives a SIGKILL.

Message stores report each add, change and removal here; the broker flushes the
batch in one SQLite transaction before the operation that caused it returns, so
a send is acknowledged only once its messages are written. Locks are not written:
a restarted broker has released them, as Service Bus does when a lock's holder is gone.

WAL mode with ``synchronous=NORMAL`` survives the broker process dying at any point
(the committed WAL is in the OS's hands); surviving power loss would need FULL.
The file is private to the broker (pickled rows): do not point it at untrusted data.
"""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .model import MessageData, MessageState, StoredMessage

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    store TEXT NOT NULL,
    seq INTEGER NOT NULL,
    row BLOB NOT NULL,
    PRIMARY KEY (store, seq)
);
CREATE TABLE IF NOT EXISTS session_state (
    store TEXT NOT NULL,
    session TEXT NOT NULL,
    state BLOB,
    PRIMARY KEY (store, session)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class Journal:
    def __init__(self, data_dir: str | Path) -> None:
        path = Path(data_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / "broker.sqlite3"
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._upserts: dict[tuple[str, int], StoredMessage] = {}
        self._deletes: set[tuple[str, int]] = set()
        self._states: dict[tuple[str, str], bytes | None] = {}
        self._sequences: dict[str, int] = {}  # entity -> last sequence number handed out

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

    @property
    def dirty(self) -> bool:
        return bool(self._upserts or self._deletes or self._states or self._sequences)

    def flush(self) -> None:
        if not self.dirty:
            return
        db = self._db
        db.execute("BEGIN")
        try:
            if self._deletes:
                db.executemany("DELETE FROM messages WHERE store = ? AND seq = ?", list(self._deletes))
            if self._upserts:
                db.executemany(
                    "INSERT OR REPLACE INTO messages (store, seq, row) VALUES (?, ?, ?)",
                    [(store, seq, _dump(msg)) for (store, seq), msg in self._upserts.items()],
                )
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
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._upserts.clear()
        self._deletes.clear()
        self._states.clear()
        self._sequences.clear()

    # ----------------------------------------------------------------- reads

    def sequences(self) -> dict[str, int]:
        """entity (lower case) -> the last sequence number it handed out."""
        rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'seq:%'")
        return {key[4:]: int(value) for key, value in rows}

    def messages(self) -> Iterator[tuple[str, StoredMessage]]:
        for store, _, row in self._db.execute("SELECT store, seq, row FROM messages ORDER BY store, seq"):
            yield store, _load(row)

    def session_states(self) -> Iterator[tuple[str, str, bytes | None]]:
        yield from self._db.execute("SELECT store, session, state FROM session_state")

    def close(self) -> None:
        self.flush()
        self._db.close()


def _dump(msg: StoredMessage) -> bytes:
    fields: dict[str, Any] = {
        "data": msg.data,
        "seq": msg.sequence_number,
        "enqueued": msg.enqueued_time,
        "state": int(msg.state),
        "count": msg.delivery_count,
        "props": msg.application_properties,
        "expires": msg.expires_at,
        "dl_source": msg.dead_letter_source,
        "eseq": msg.enqueue_sequence_number,
    }
    return pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)


def _load(row: bytes) -> StoredMessage:
    f = pickle.loads(row)
    data: MessageData = f["data"]
    return StoredMessage(
        data=data,
        sequence_number=f["seq"],
        enqueued_time=f["enqueued"],
        state=MessageState(f["state"]),
        delivery_count=f["count"],
        application_properties=f["props"],
        expires_at=f["expires"],
        dead_letter_source=f["dl_source"],
        enqueue_sequence_number=f["eseq"],
    )
