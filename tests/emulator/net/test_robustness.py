"""Bad input never takes the broker down: other clients carry on."""

from __future__ import annotations

import socket
import struct

from azure.servicebus import ServiceBusClient
from azure.servicebus._common import mgmt_handlers
from azure.servicebus.exceptions import ServiceBusError

from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient, drain, send

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def _raw(emulator: Emulator, payload: bytes, read: bool = True) -> bytes:
    assert emulator.port is not None
    with socket.create_connection((emulator.host, emulator.port), timeout=3) as sock:
        sock.sendall(payload)
        if not read:
            return b""
        chunks = b""
        try:
            while chunk := sock.recv(4096):
                chunks += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return chunks


def test_garbage_bytes_close_only_that_connection(emulator: Emulator, client: ServiceBusClient) -> None:
    _raw(emulator, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    _raw(emulator, b"\x00" * 1000)
    _raw(emulator, AMQP_HEADER, read=False)  # header, then hang up mid-handshake
    send(client, "q", "still-serving")
    assert [str(m) for m in drain(client, "q")] == ["still-serving"]


def test_malformed_and_truncated_frames_after_a_valid_header(emulator: Emulator, client: ServiceBusClient) -> None:
    bogus_frame = struct.pack(">IBBH", 64, 2, 0, 0) + b"\xff" * 56  # body that is not a performative
    truncated = struct.pack(">IBBH", 4096, 2, 0, 0) + b"\x00\x53\x10"  # says 4 KiB, sends 3 bytes
    huge = struct.pack(">IBBH", 0x7FFFFFFF, 2, 0, 0)  # over max-frame-size
    for payload in (bogus_frame, truncated, huge):
        reply = _raw(emulator, AMQP_HEADER + payload)
        assert reply.startswith(AMQP_HEADER)  # the broker answered the protocol header, then closed
    send(client, "q", "after-bad-frames")
    assert [str(m) for m in drain(client, "q")] == ["after-bad-frames"]


def test_unknown_management_operation_is_an_error_reply(client: ServiceBusClient) -> None:
    send(client, "q", "x")
    with client.get_queue_receiver("q", max_wait_time=2) as r:
        try:
            r._mgmt_request_response_with_retry(b"com.microsoft:no-such-op", {}, mgmt_handlers.default)
            raise AssertionError("expected an error")
        except ServiceBusError as exc:
            assert "not supported" in str(exc)
        # The same management link keeps working.
        (peeked,) = r.peek_messages(max_message_count=1, sequence_number=1)
        assert str(peeked) == "x"


def test_many_abrupt_disconnects_leave_no_locks_behind(emulator: Emulator) -> None:
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        send(c, "short", *[f"m{i}" for i in range(5)])
        r = c.get_queue_receiver("short", max_wait_time=2)
        r.__enter__()
        got = r.receive_messages(max_message_count=5, max_wait_time=30)
        assert len(got) == 5
        r._handler._connection._transport.sock.close()  # the network drops; no detach, no close
        r._handler = None
    # As on Service Bus the locks outlive the connection until they expire (1 s here); then the
    # messages are available again, none lost.
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        assert len(drain(c, "short", wait=3)) == 5
