"""Many connections at once, and malformed traffic while well-behaved clients carry on."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import threading
import time

from azure.servicebus import ServiceBusMessage
from proton import Connection, Transport

from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient, drain

CONNECTIONS = 200


def test_two_hundred_concurrent_connections(emulator: Emulator) -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run() -> int:
        clients = [AsyncClient.from_connection_string(emulator.connection_string) for _ in range(CONNECTIONS)]
        senders = [c.get_queue_sender("q") for c in clients]
        await asyncio.gather(*(s.__aenter__() for s in senders))
        assert emulator._loop is not None
        open_now = emulator._loop.connection_count
        await asyncio.gather(*(s.send_messages(ServiceBusMessage(f"c{i}")) for i, s in enumerate(senders)))
        await asyncio.gather(*(s.close() for s in senders))
        await asyncio.gather(*(c.close() for c in clients))
        return open_now

    open_at_peak = asyncio.run(run())
    assert open_at_peak >= CONNECTIONS
    assert emulator.broker.counts("q")["active"] == CONNECTIONS


def _valid_client_bytes() -> bytes:
    """The opening bytes a real AMQP client sends (header, open, begin, attach), made by proton."""
    conn = Connection()
    transport = Transport(Transport.CLIENT)
    transport.bind(conn)
    conn.container = "fuzzer"
    conn.hostname = "localhost"
    conn.open()
    ssn = conn.session()
    ssn.open()
    link = ssn.sender("fuzz-link")
    link.target.address = "q"
    link.open()
    out = b""
    while (n := transport.pending()) > 0:
        out += transport.peek(n) or b""
        transport.pop(n)
    return out


def _mutations(seed: bytes, rng: random.Random) -> bytes:
    data = bytearray(seed)
    kind = rng.randrange(5)
    if kind == 0:  # flip bytes
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:  # truncate
        data = data[: rng.randrange(1, len(data))]
    elif kind == 2:  # random garbage after the header
        data = data[:8] + bytearray(rng.randbytes(rng.randint(1, 300)))
    elif kind == 3:  # duplicate a slice
        i = rng.randrange(len(data))
        data = data[:i] + data[i : i + 40] + data[i:]
    else:  # absurd frame size
        data = data[:8] + bytearray(b"\xff\xff\xff\xf0\x02\x00\x00\x00") + data[16:]
    return bytes(data)


def test_fuzzed_frames_never_disturb_well_behaved_clients(emulator: Emulator) -> None:
    seed = _valid_client_bytes()
    assert seed.startswith(b"AMQP")
    rng = random.Random(7)
    stop = threading.Event()
    sent = {"n": 0}

    def fuzz() -> None:
        assert emulator.port is not None
        while not stop.is_set() and sent["n"] < 50_000:  # bounded, and stops with the test
            payload = _mutations(seed, rng)
            try:
                with socket.create_connection((emulator.host, emulator.port), timeout=2) as sock:
                    sock.sendall(payload)
                    sock.settimeout(0.05)
                    with contextlib.suppress(TimeoutError, OSError):
                        sock.recv(4096)
            except OSError:
                pass
            sent["n"] += 1

    fuzzers = [threading.Thread(target=fuzz) for _ in range(2)]
    for t in fuzzers:
        t.start()
    try:
        with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
            deadline = time.monotonic() + 60
            rounds = 0
            while time.monotonic() < deadline and rounds < 5:
                with c.get_queue_sender("q") as s:
                    s.send_messages([ServiceBusMessage(f"ok-{rounds}-{i}") for i in range(5)])
                got = drain(c, "q", wait=0.5, count=5)
                assert sorted(str(m) for m in got) == sorted(f"ok-{rounds}-{i}" for i in range(5))
                rounds += 1
    finally:
        stop.set()
        for t in fuzzers:
            t.join(10)
    assert rounds == 5
    assert sent["n"] >= 500  # the malformed traffic ran throughout
    print(f"fuzz connections: {sent['n']}")
