"""Give proton a client's transfers with delivery-ids in sequence.

The SDK reads the session's next delivery-id, then increments it and writes the
transfer, without a lock. With several threads or tasks on one connection
(concurrent peeks, ``AutoLockRenewer(max_workers=8)``) two transfers can carry the
same id, or a later id can reach the wire first. AMQP says ids arrive in
sequence and proton ends the whole connection ("sequencing error") when they do
not; Service Bus answers them all. So this filter:

- holds a transfer whose id is ahead of the next expected one until the missing
  ones arrive (at most ``MAX_WAIT`` seconds, then it is renumbered);
- renumbers a transfer whose id was already used (a duplicate) to the next id.

Renumbering only changes which id the broker's disposition names; both requests
are still answered (management replies are matched by message id, not delivery id).
Only complete frames are inspected, and only ``begin``, ``end`` and ``transfer``
are decoded (a few bytes each); everything else passes through untouched. While
reading a transfer it also notes whether its message-format says "batch", which
proton does not expose.
"""

from __future__ import annotations

import struct
import time

from .amqpvalues import EncodingError, value_end

BEGIN = 0x11
TRANSFER = 0x14
END = 0x17
MAX_WAIT = 1.0
_WATCHED = frozenset((0x11, 0x14, 0x17))  # begin, transfer, end
MAX_FRAME = 256 * 1024  # the broker's max-frame-size, unless the connection says otherwise
BATCH_FORMAT = 0x80013700  # Service Bus batch envelope: one encoded message per data section
_HEADER = b"AMQP"


class _Channel:
    __slots__ = ("continuing", "expected", "held", "held_since", "partial")

    def __init__(self, next_id: int | None) -> None:
        self.expected = next_id  # the delivery-id proton wants next (None: take the first one seen)
        self.held: dict[int, list[bytes]] = {}  # early deliveries: id -> their frames
        self.continuing: dict[int, int] = {}  # handle -> id of a held delivery still receiving frames
        self.held_since = 0.0
        self.partial: set[int] = set()  # handles whose current delivery (passed on) has more frames


def _uint(buf: bytes, pos: int) -> tuple[int | None, int]:
    code = buf[pos]
    if code == 0x40:
        return None, pos + 1
    if code == 0x43:
        return 0, pos + 1
    if code == 0x52:
        return buf[pos + 1], pos + 2
    if code == 0x70:
        return struct.unpack_from(">I", buf, pos + 1)[0], pos + 5
    raise EncodingError(f"not a uint: 0x{code:02x}")


def _list_fields(buf: bytes, pos: int) -> tuple[int, int]:
    """(first field position, field count) of a list at ``pos``."""
    code = buf[pos]
    if code == 0x45:
        return pos + 1, 0
    if code == 0xC0:
        return pos + 3, buf[pos + 2]
    if code == 0xD0:
        return pos + 9, struct.unpack_from(">I", buf, pos + 5)[0]
    raise EncodingError(f"not a list: 0x{code:02x}")


def _performative(frame: bytes) -> tuple[int, int] | None:
    """(descriptor code, position of its field list) of an AMQP frame, or None (heartbeat, SASL)."""
    if len(frame) <= 8 or frame[5] != 0:
        return None
    body = frame[4] * 4
    if frame[body] != 0x00:
        return None
    if frame[body + 1] == 0x53:
        return frame[body + 2], body + 3
    if frame[body + 1] == 0x80:
        return struct.unpack_from(">Q", frame, body + 2)[0], body + 10
    return None


class TransferOrder:
    """Per connection: feed the bytes a client sent, get them back with transfers in order."""

    def __init__(self, max_frame_size: int = MAX_FRAME) -> None:
        # A frame declaring more than this is passed straight to proton, which refuses it at once:
        # waiting for its bytes would let one header make the broker hold megabytes per connection.
        self.max_frame_size = max_frame_size
        self._buf = b""
        self._off = False  # the stream is not AMQP framing: pass it through untouched
        self._channels: dict[int, _Channel] = {}
        self.holding = False  # any channel holding frames (checked by the loop's timer)
        self._replacement: bytes | None = None  # a renumbered frame to pass on instead of the original
        self.batch_tags: dict[bytes, int] = {}  # delivery tags of transfers whose message-format is batch

    def take_batch(self, tag: bytes) -> bool:
        """Was the transfer with this delivery tag sent as a batch (message-format 0x80013700)?
        (proton does not expose a transfer's message-format; this filter reads it.)"""
        count = self.batch_tags.get(tag)
        if not count:
            return False
        if count == 1:
            del self.batch_tags[tag]
        else:
            self.batch_tags[tag] = count - 1
        return True

    def feed(self, data: bytes) -> bytes:
        if self._off:
            return data
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos = 0
        start = 0  # start of the run of frames passed through untouched
        n = len(buf)
        unpack = struct.unpack_from
        while pos + 8 <= n:
            if buf[pos] == 0x41:  # "AMQP" protocol header (a frame size never starts with 0x41)
                pos += 8
                continue
            size = unpack(">I", buf, pos)[0]
            end = pos + size
            if size < 8 or size > self.max_frame_size:
                self._off = True  # not AMQP framing, or too large: proton sees it all and refuses it
                out.append(buf[start:])
                self._buf = b""
                return b"".join(out)
            if end > n:
                break
            body = pos + buf[pos + 4] * 4
            # Only begin, end and transfer (small-ulong descriptors on AMQP frames) are looked at.
            if (
                size > 8
                and buf[pos + 5] == 0
                and body + 3 <= end
                and buf[body] == 0
                and buf[body + 1] == 0x53
                and buf[body + 2] in _WATCHED
            ):
                frame = buf[pos:end]
                channel = unpack(">H", buf, pos + 6)[0]
                try:
                    keep = self._route(channel, buf[body + 2], frame, body + 3 - pos)
                except (EncodingError, IndexError, struct.error):
                    keep = True  # not ours to judge: proton will
                if not keep:
                    out.append(buf[start:pos])
                    start = end
                    if self._replacement is not None:
                        out.append(self._replacement)
                        self._replacement = None
                        out.extend(self._release_ready(channel))
                elif self.holding:
                    out.append(buf[start:end])
                    start = end
                    out.extend(self._release_ready(channel))
            pos = end
        self._buf = buf[pos:] if pos < n else b""
        if start == 0 and pos == n:
            return buf  # the common case: everything passes, untouched
        out.append(buf[start:pos])
        return b"".join(out)

    def _route(self, channel: int, code: int, frame: bytes, fields: int) -> bool:
        """True: pass the frame on now. False: it is held."""
        if code == BEGIN:
            pos, count = _list_fields(frame, fields)
            next_id = None
            if count >= 2:
                pos = value_end(frame, pos)  # remote-channel
                next_id, _ = _uint(frame, pos)
            self._channels[channel] = _Channel(next_id)
            return True
        if code == END:
            self._channels.pop(channel, None)
            return True
        state = self._channels.get(channel)
        if state is None:
            state = self._channels[channel] = _Channel(None)
        pos, count = _list_fields(frame, fields)
        if count < 2:
            return True
        handle, pos = _uint(frame, pos)
        delivery_id, pos = _uint(frame, pos)
        more = False
        if count >= 4:
            tag_end = value_end(frame, pos)
            message_format, after = _uint(frame, tag_end)
            if message_format == BATCH_FORMAT and delivery_id is not None:
                tag = frame[pos + (2 if frame[pos] == 0xA0 else 5) : tag_end]
                self.batch_tags[tag] = self.batch_tags.get(tag, 0) + 1
            if count >= 6:
                pos = value_end(frame, after)  # settled
                more = frame[pos] == 0x41 or (frame[pos] == 0x56 and frame[pos + 1] == 1)
        if handle is None:
            return True  # malformed: proton refuses it
        if delivery_id is None or handle in state.partial or handle in state.continuing:
            # A later frame of a multi-frame delivery (it may repeat the id or omit it).
            if not more:
                state.partial.discard(handle)
            held_id = state.continuing.get(handle)
            if held_id is None:
                return True
            state.held[held_id].append(frame)
            if not more:
                del state.continuing[handle]
            return False
        if state.expected is None or delivery_id == state.expected:
            state.expected = delivery_id + 1
            if more:
                state.partial.add(handle)
            return True
        if not _after(delivery_id, state.expected):
            self._replacement = renumber(frame, fields, state.expected)  # a duplicate id
            state.expected += 1
            if more:
                state.partial.add(handle)
            return False
        if not state.held:
            state.held_since = time.monotonic()
        state.held[delivery_id] = [frame]
        if more and handle is not None:
            state.continuing[handle] = delivery_id
        self.holding = True
        return False

    def _release_ready(self, channel: int) -> list[bytes]:
        """Frames of held deliveries whose turn has come (after a frame was passed on ``channel``)."""
        state = self._channels.get(channel)
        out: list[bytes] = []
        if state is None or state.expected is None:
            return out
        while state.expected in state.held:
            out.extend(state.held.pop(state.expected))
            for handle, held_id in list(state.continuing.items()):
                if held_id == state.expected:
                    del state.continuing[handle]  # its remaining frames now pass straight through
            state.expected += 1
        self.holding = any(c.held for c in self._channels.values())
        return out

    def overdue(self, now: float) -> bytes:
        """Frames held too long, renumbered in id order: whatever went missing is not coming."""
        out: list[bytes] = []
        for state in self._channels.values():
            if state.held and now - state.held_since > MAX_WAIT and state.expected is not None:
                for delivery_id in sorted(state.held, key=lambda d: (d - delivery_base(state)) & 0xFFFFFFFF):
                    frames = state.held.pop(delivery_id)
                    first = _performative(frames[0])
                    if first is not None:
                        frames[0] = renumber(frames[0], first[1], state.expected)
                    out.extend(frames)
                    state.expected += 1
                state.continuing.clear()
        self.holding = any(c.held for c in self._channels.values())
        return b"".join(out)


def _after(a: int, b: int) -> bool:
    """Serial-number order (RFC 1982) on 32-bit delivery-ids: is ``a`` after ``b``?"""
    return a != b and ((a - b) & 0xFFFFFFFF) < 0x80000000


def delivery_base(state: _Channel) -> int:
    return state.expected or 0


def renumber(frame: bytes, fields: int, delivery_id: int) -> bytes:
    """The transfer ``frame`` with its delivery-id replaced (the list at ``fields`` is re-sized)."""
    first, count = _list_fields(frame, fields)
    id_start = value_end(frame, first)  # after the handle
    id_end = value_end(frame, id_start)
    list_end = value_end(frame, fields)
    items = frame[first:id_start] + b"\x70" + struct.pack(">I", delivery_id) + frame[id_end:list_end]
    if len(items) + 1 <= 255:
        encoded = b"\xc0" + bytes([len(items) + 1, count]) + items
    else:
        encoded = b"\xd0" + struct.pack(">II", len(items) + 4, count) + items
    out = frame[8:fields] + encoded + frame[list_end:]
    return struct.pack(">I", len(out) + 8) + frame[4:8] + out
