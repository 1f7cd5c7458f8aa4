"""``snapshot.bin``: every live message of a data directory, written compactly, read in one pass.

Layout: ``MAGIC``, the index length (8 bytes, little-endian), the index (JSON), then every
message's encoded sections back to back. The index holds the store names and one array per
message: the store's position, the message's scalars (``rows.py``'s meta, as positional values)
and the lengths of its six byte sections. A start-up parses the index with one ``json.loads`` and
slices the sections out of the memory-mapped file: no per-message JSON parse and no database
row, which is what made a start-up from the journal's rows cost ~20 us a message.

Like the journal's rows it holds JSON and AMQP-encoded bytes only: reading it cannot run code.
Written to ``snapshot.bin.partial`` and renamed over the old one (atomic), so a crash leaves the
old snapshot or the new one, whole.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .model import MessageData, MessageState, StoredMessage
from .rows import RowError, decode_map, encode_map
from .values import NO_ENTRIES

FILE_NAME = "snapshot.bin"
PARTIAL = FILE_NAME + ".partial"
MAGIC = b"SBNSNAP1"
_STATES = tuple(MessageState)

_CHANGED_NONE = -1  # the length that says "application properties as the sender sent them"


def remove_partial(data_dir: Path) -> None:
    """A compaction killed before its rename left a partial file: the old snapshot stands."""
    (data_dir / PARTIAL).unlink(missing_ok=True)


def _entry(store: int, msg: StoredMessage, sections: list[bytes]) -> list[Any]:
    data = msg.data
    annotations = encode_map(data.annotations)
    changed = b"" if msg.changed_properties is None else encode_map(msg.changed_properties)
    parts = (
        data.raw_properties,
        data.raw_application_properties,
        data.raw_body,
        data.raw_delivery_annotations,
        annotations,
        changed,
    )
    sections.extend(parts)
    lengths = [len(p) for p in parts]
    if msg.changed_properties is None:
        lengths[5] = _CHANGED_NONE
    return [
        store,
        msg.sequence_number,
        msg.enqueued_time,
        int(msg.state),
        msg.delivery_count,
        msg.expires_at,
        msg.dead_letter_source,
        msg.enqueue_sequence_number,
        data.size,
        data.durable,
        data.priority,
        data.message_id,
        data.correlation_id,
        data.subject,
        data.content_type,
        data.to,
        data.reply_to,
        data.reply_to_session_id,
        data.session_id,
        data.partition_key,
        data.ttl,
        data.scheduled_enqueue_time,
        *lengths,
    ]


def write(path: Path, stores: Iterable[tuple[str, Iterable[StoredMessage]]]) -> int:
    """Write a snapshot of ``stores`` ((lower-case store path, messages)) to ``path``, atomically.
    Stores are written in name order and messages in sequence order (what a start-up expects).
    Returns the number of messages written."""
    names: list[str] = []
    index: list[list[Any]] = []
    sections: list[bytes] = []
    for name, messages in sorted(stores, key=lambda item: item[0]):
        names.append(name)
        position = len(names) - 1
        for msg in sorted(messages, key=lambda m: m.sequence_number):
            index.append(_entry(position, msg, sections))
    head = json.dumps({"version": 1, "stores": names, "messages": index}, separators=(",", ":")).encode()
    partial = path.with_name(PARTIAL)
    with open(partial, "wb") as out:
        out.write(MAGIC)
        out.write(len(head).to_bytes(8, "little"))
        out.write(head)
        out.writelines(sections)
        out.flush()
        os.fsync(out.fileno())
    pause_for_tests("before-rename")
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself is durable
    finally:
        os.close(directory)
    return len(index)


def pause_for_tests(point: str) -> None:
    """``SBNOTEBOOK_COMPACTION_PAUSE=before-rename`` (the new snapshot written, not yet renamed)
    or ``after-rename`` (renamed, the tail not yet cleared): say so on stdout and wait a minute,
    so that a test can kill the emulator there (tests/test_emulator_compaction.py)."""
    if os.environ.get("SBNOTEBOOK_COMPACTION_PAUSE") == point:
        import time

        print(f"compaction paused {point}", flush=True)
        time.sleep(60)


def read(path: Path) -> Iterator[tuple[str, StoredMessage]]:
    """Every message of a snapshot: (store path, message), by store then sequence number."""
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise RowError(f"{path} is not an emulator snapshot")
        size = int.from_bytes(f.read(8), "little")
        try:
            doc = json.loads(f.read(size))
            names: list[str] = doc["stores"]
            index: list[list[Any]] = doc["messages"]
        except (ValueError, KeyError, TypeError) as exc:
            raise RowError(f"{path}: the index does not decode: {exc}") from None
        start = len(MAGIC) + 8 + size
        total = os.fstat(f.fileno()).st_size
        if total == start:
            yield from ()
            return
        view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        at = start
        for entry in index:
            try:
                (
                    store,
                    seq,
                    enqueued,
                    state,
                    count,
                    expires,
                    dl_source,
                    eseq,
                    size_,
                    durable,
                    priority,
                    message_id,
                    correlation_id,
                    subject,
                    content_type,
                    to,
                    reply_to,
                    reply_to_session_id,
                    session_id,
                    partition_key,
                    ttl,
                    scheduled,
                    n_props,
                    n_app,
                    n_body,
                    n_da,
                    n_ann,
                    n_changed,
                ) = entry
                cut = at + n_props
                raw_props = view[at:cut]
                at, cut = cut, cut + n_app
                raw_app = view[at:cut]
                at, cut = cut, cut + n_body
                raw_body = view[at:cut]
                at, cut = cut, cut + n_da
                raw_da = view[at:cut]
                at, cut = cut, cut + n_ann
                annotations = decode_map(view[at:cut]) if n_ann else NO_ENTRIES
                at = cut
                changed = None
                if n_changed != _CHANGED_NONE:
                    changed = dict(decode_map(view[at : at + n_changed]))
                    at += n_changed
                if at > total:
                    raise ValueError("the sections end past the file")
                data = MessageData(
                    raw_props,
                    raw_body,
                    size_,
                    raw_app,
                    raw_da,
                    durable,
                    priority,
                    annotations,
                    message_id,
                    correlation_id,
                    subject,
                    content_type,
                    to,
                    reply_to,
                    reply_to_session_id,
                    session_id,
                    partition_key,
                    ttl,
                    scheduled,
                )
                msg = StoredMessage(
                    data, seq, enqueued, _STATES[state], count, changed, None, None, None, expires, dl_source, eseq
                )
            except (TypeError, ValueError, IndexError) as exc:
                raise RowError(f"{path}: a message does not decode: {exc}") from None
            yield names[store], msg
    finally:
        view.close()
