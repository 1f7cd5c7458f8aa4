"""``snapshot.bin``: every live message of a data directory, written compactly, read in one pass.

Layout (version 2): ``MAGIC``, then blocks, then an end mark. A block holds up to ``BLOCK``
messages of one store: its index length and sections length (8 bytes each, little-endian), the
index (JSON: the store's path and one array per message, the message's scalars (``rows.py``'s
meta, as positional values) and the lengths of its six byte sections), then the messages' encoded
sections back to back. The end mark is a block header of two zero lengths.

Why blocks: a start-up parses one block's index at a time (one ``json.loads``, no per-message JSON
parse and no database row) and lets it go before the next, so its peak memory is the messages
plus one block, not the messages plus the whole index (which took ~1 GiB more at 10^6 messages);
writing holds one block's sections at a time too. Version 1 files (``SBNSNAP1``: one index for
the whole file) are still read.

Like the journal's rows it holds JSON and AMQP-encoded bytes only: reading it cannot run code.
Written to ``snapshot.bin.partial`` and renamed over the old one (atomic), so a crash leaves the
old snapshot or the new one, whole.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Generator, Iterable, Iterator
from itertools import groupby, islice
from pathlib import Path
from typing import IO, Any

from ..broker.model import MessageData, MessageState, StoredMessage
from ..broker.values import NO_ENTRIES
from .rows import RowError, decode_map, encode_map

FILE_NAME = "snapshot.bin"
PARTIAL = FILE_NAME + ".partial"
MAGIC = b"SBNSNAP2"
MAGIC_V1 = b"SBNSNAP1"
BLOCK = 4096  # messages per block: big enough that a block's json.loads is cheap per message
_END = bytes(16)
_STATES = tuple(MessageState)
_FIELDS = 27  # an index entry: 8 of the stored message, 13 of its data, 6 section lengths

_CHANGED_NONE = -1  # the length that says "application properties as the sender sent them"


def remove_partial(data_dir: Path) -> None:
    """A compaction killed before its rename left a partial file: the old snapshot stands."""
    (data_dir / PARTIAL).unlink(missing_ok=True)


def _entry(msg: StoredMessage, sections: list[bytes]) -> list[Any]:
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


def _write_block(out: IO[bytes], name: str, messages: list[StoredMessage]) -> None:
    sections: list[bytes] = []
    index = [_entry(msg, sections) for msg in messages]
    head = json.dumps({"store": name, "messages": index}, separators=(",", ":")).encode()
    out.write(len(head).to_bytes(8, "little"))
    out.write(sum(map(len, sections)).to_bytes(8, "little"))
    out.write(head)
    out.writelines(sections)


def write(path: Path, stores: Iterable[tuple[str, Iterable[StoredMessage]]]) -> int:
    """Write a snapshot of ``stores`` ((lower-case store path, messages)) to ``path``, atomically.
    Stores are written in name order and messages in sequence order (what a start-up expects).
    Returns the number of messages written."""
    written = 0
    partial = path.with_name(PARTIAL)
    with open(partial, "wb") as out:
        out.write(MAGIC)
        for name, messages in sorted(stores, key=lambda item: item[0]):
            ordered = iter(sorted(messages, key=lambda m: m.sequence_number))
            while block := list(islice(ordered, BLOCK)):
                _write_block(out, name, block)
                written += len(block)
        out.write(_END)
        out.flush()
        os.fsync(out.fileno())
    pause_for_tests("before-rename")
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself is durable
    finally:
        os.close(directory)
    return written


def pause_for_tests(point: str) -> None:
    """``SBNOTEBOOK_COMPACTION_PAUSE=before-rename`` (the new snapshot written, not yet renamed)
    or ``after-rename`` (renamed, the tail not yet cleared): say so on stdout and wait a minute,
    so that a test can kill the emulator there (tests/emulator/persistence/test_compaction.py)."""
    if os.environ.get("SBNOTEBOOK_COMPACTION_PAUSE") == point:
        import time

        print(f"compaction paused {point}", flush=True)
        time.sleep(60)


def read(path: Path) -> Iterator[tuple[str, StoredMessage]]:
    """Every message of a snapshot: (store path, message), by store then sequence number."""
    with open(path, "rb") as f:
        magic = f.read(len(MAGIC))
        if magic == MAGIC_V1:
            yield from _read_v1(path, f)
            return
        if magic != MAGIC:
            raise RowError(f"{path} is not an emulator snapshot")
        while True:
            lengths = f.read(16)
            if len(lengths) != 16:
                raise RowError(f"{path} ends without its end mark: the file is damaged")
            if lengths == _END:
                return
            head_size, sections_size = int.from_bytes(lengths[:8], "little"), int.from_bytes(lengths[8:], "little")
            head, sections = f.read(head_size), f.read(sections_size)
            if len(head) != head_size or len(sections) != sections_size:
                raise RowError(f"{path}: a block ends past the file")
            try:
                doc = json.loads(head)
                name: str = doc["store"]
                index: list[list[Any]] = doc["messages"]
            except (ValueError, KeyError, TypeError) as exc:
                raise RowError(f"{path}: a block's index does not decode: {exc}") from None
            if (yield from _messages(path, name, index, sections, 0)) != sections_size:
                raise RowError(f"{path}: a block's sections do not match its index")


def _read_v1(path: Path, f: IO[bytes]) -> Iterator[tuple[str, StoredMessage]]:
    """A version 1 snapshot: one JSON index for the whole file, each entry led by a store number."""
    size = int.from_bytes(f.read(8), "little")
    try:
        doc = json.loads(f.read(size))
        names: list[str] = doc["stores"]
        index: list[list[Any]] = doc["messages"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RowError(f"{path}: the index does not decode: {exc}") from None
    at = len(MAGIC_V1) + 8 + size
    if os.fstat(f.fileno()).st_size == at:
        return
    view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        for store, entries in groupby(index, key=lambda entry: entry[0]):
            at = yield from _messages(path, names[store], [entry[1:] for entry in entries], view, at)
    except (TypeError, IndexError) as exc:
        raise RowError(f"{path}: a message does not decode: {exc}") from None
    finally:
        view.close()


def _messages(
    path: Path, name: str, index: list[list[Any]], buffer: Any, at: int
) -> Generator[tuple[str, StoredMessage], None, int]:
    """(``name``, message) for each entry of ``index``, the sections read from ``buffer`` from
    offset ``at`` on. Returns the offset after the last message's sections."""
    end = len(buffer)
    for entry in index:
        try:
            if len(entry) != _FIELDS:
                raise ValueError(f"{len(entry)} fields, not {_FIELDS}")
            seq, enqueued, state, count, expires, dl_source, eseq, size = entry[:8]
            n_props, n_app, n_body, n_da, n_ann, n_changed = entry[_FIELDS - 6 :]
            cut = at + n_props
            raw_props = buffer[at:cut]
            at, cut = cut, cut + n_app
            raw_app = buffer[at:cut]
            at, cut = cut, cut + n_body
            raw_body = buffer[at:cut]
            at, cut = cut, cut + n_da
            raw_da = buffer[at:cut]
            at, cut = cut, cut + n_ann
            annotations = decode_map(buffer[at:cut]) if n_ann else NO_ENTRIES
            at = cut
            changed = None
            if n_changed != _CHANGED_NONE:
                changed = dict(decode_map(buffer[at : at + n_changed]))
                at += n_changed
            if at > end:
                raise ValueError("the sections end past the file")
            # entry[8:21]: MessageData's scalars in its field order (``_entry``), the annotations after priority
            scalars = (*entry[8:10], annotations, *entry[10:21])
            data = MessageData(raw_props, raw_body, size, raw_app, raw_da, *scalars)
            msg = StoredMessage(
                data, seq, enqueued, _STATES[state], count, changed, None, None, None, expires, dl_source, eseq
            )
        except (TypeError, ValueError, IndexError) as exc:
            raise RowError(f"{path}: a message does not decode: {exc}") from None
        yield name, msg
    return at
