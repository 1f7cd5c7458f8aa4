"""Opening links without the SDK's sleeps (``core/sdk/opening.py`` ``open_without_sleeps``).

The SDK's open loop handles one frame, then sleeps 50 ms, about nine times per link: ~0.45 s on
every first use of an entity, whatever the latency. These tests time opens against the embedded
emulator (the real SDK, no mocks) and fail on the SDK's own loop; the last one fails when the SDK
changes the shape of the open that ``without_sleeps`` hooks into."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.exceptions import MessagingEntityNotFoundError

from sbnotebook import core
from sbnotebook.core.sdk.opening import POLLING_OPENS, close_now, open_without_sleeps, without_sleeps
from sbnotebook.emulator import Emulator


def _client(emulator: Emulator) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0)


SDK_POLL = 0.05  # the SDK's open polls its handshake with asyncio.sleep(0.05) (core/sdk/opening.py)


@contextmanager
def recorded_sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every ``asyncio.sleep`` delay asked for meanwhile, on any loop: what an open waited, counted
    rather than timed (a wall-clock bound fails on a loaded machine; a sleep is there or not)."""
    real_sleep = asyncio.sleep
    slept: list[float] = []

    async def recorded(delay: float, *args: Any, **kwargs: Any) -> Any:
        slept.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", recorded)
    try:
        yield slept
    finally:
        monkeypatch.setattr(asyncio, "sleep", real_sleep)


async def _open_sleeps(emulator: Emulator, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    async with _client(emulator) as client:
        rcv = client.get_queue_receiver("q", prefetch_count=0)
        with recorded_sleeps(monkeypatch) as slept:
            if fast:
                await open_without_sleeps(rcv)
            else:
                await rcv.__aenter__()
        await close_now(rcv)
        return slept


def test_a_receiver_opens_without_the_sdks_sleeps(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's own open polls (~0.45 s of sleeps); ours does not: counted, so that the SDK's count
    # shows the check sees them.
    assert SDK_POLL in asyncio.run(_open_sleeps(emulator, False, monkeypatch))
    assert SDK_POLL not in asyncio.run(_open_sleeps(emulator, True, monkeypatch))


async def _first_peek_after_open(emulator: Emulator, management: bool) -> float:
    async with _client(emulator) as client:
        rcv = client.get_queue_receiver("q", prefetch_count=0)
        await open_without_sleeps(rcv, management=management)
        t0 = time.perf_counter()
        await rcv.peek_messages(max_message_count=1)
        elapsed = time.perf_counter() - t0
        await close_now(rcv)
        return elapsed


def test_the_management_link_is_attached_with_the_entity_link_so_the_first_peek_is_one_round_trip(
    emulator: Emulator,
) -> None:
    rt = 1.0  # a round trip far above what a loaded machine adds to either peek
    core.send("q", ["one"], connection=emulator.connection_string)
    emulator.latency_ms = rt * 1000
    try:
        first = asyncio.run(_first_peek_after_open(emulator, True))
        late = asyncio.run(_first_peek_after_open(emulator, False))  # the SDK attaches it on the peek
    finally:
        emulator.latency_ms = 0
    assert late >= 2 * rt, f"without the early attach {late / rt:.1f} round trips"
    # One round trip fewer: against the other peek, not a fixed figure (a loaded machine slows both).
    assert late - first > 0.5 * rt, f"first peek {first / rt:.1f} round trips, without the early attach {late / rt:.1f}"


def test_kit_first_use_of_an_entity_and_a_session_receive_open_without_sleeps(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = emulator.connection_string
    core.send("sq60", [{"body": "s", "session_id": "a"}], connection=cs)
    conn = core.connect(cs, warm=False)
    with recorded_sleeps(monkeypatch) as slept:
        core.peek("q", max_messages=1, connection=conn)
    assert SDK_POLL not in slept, slept  # the SDK's loop alone was ~0.45 s of such sleeps
    with recorded_sleeps(monkeypatch) as slept:
        with core.receive("sq60", max_messages=1, session_id="a", connection=conn) as batch:
            assert batch.complete().count("completed") == 1
    assert SDK_POLL not in slept, slept


def test_an_open_cancelled_in_flight_cancels_its_keep_alive_instead_of_waiting_it_out(emulator: Emulator) -> None:
    """A scan cancels the windows it launched ahead once it has found the end; a window opening its
    link is then closed by the SDK's own ``_open`` clean-up, which awaited the AMQP client's
    keep-alive task (one-second sleeps): every scan of a 500-message queue took ~1 s. The task must
    be cancelled by the close, not end on its own after its sleep."""

    async def go() -> tuple[bool, Any]:
        async with _client(emulator) as client:
            rcv = client.get_queue_receiver("q", prefetch_count=0)
            opening = asyncio.ensure_future(open_without_sleeps(rcv))
            while getattr(getattr(rcv, "_handler", None), "_keep_alive_thread", None) is None:
                assert not opening.done()
                await asyncio.sleep(0)
            keep_alive = rcv._handler._keep_alive_thread
            in_flight = not rcv._running  # the handshake is still under way (0.2 s a round trip)
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            await close_now(rcv)
            return in_flight, keep_alive

    emulator.latency_ms = 200
    try:
        in_flight, keep_alive = asyncio.run(go())
    finally:
        emulator.latency_ms = 0
    assert in_flight
    assert keep_alive.done() and keep_alive.cancelled()


def test_open_errors_are_the_sdks_own(emulator: Emulator) -> None:
    async def go() -> None:
        async with _client(emulator) as client:
            rcv = client.get_queue_receiver("no-such-queue", prefetch_count=0)
            try:
                with pytest.raises(MessagingEntityNotFoundError):
                    await open_without_sleeps(rcv)
            finally:
                await close_now(rcv)

    asyncio.run(go())


def test_a_sender_opens_without_sleeps_and_keeps_its_size_limits(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's sender open polls with ``asyncio.sleep(0.05)``; ours never sleeps. Counted, not timed
    (a wall-clock bound failed under a loaded nox run): every sleep during the open is recorded."""
    real_sleep = asyncio.sleep
    slept: list[float] = []

    async def recorded(delay: float, *args: Any, **kwargs: Any) -> Any:
        slept.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    async def go() -> tuple[list[float], int]:
        async with _client(emulator) as client:
            sender = client.get_queue_sender("q")
            slept.clear()
            monkeypatch.setattr(asyncio, "sleep", recorded)
            try:
                await open_without_sleeps(sender, management=False)
            finally:
                monkeypatch.setattr(asyncio, "sleep", real_sleep)
            during_open = list(slept)
            batch = await sender.create_message_batch()
            await close_now(sender)
            return during_open, batch.max_size_in_bytes

    during_open, size = asyncio.run(go())
    assert 0.05 not in during_open, during_open  # the SDK's poll (other tasks of the loop may sleep meanwhile)
    assert size > 0


def test_without_sleeps_is_applied_once() -> None:
    class Handler:
        _create_handler = staticmethod(lambda auth: None)

    h = Handler()
    without_sleeps(h)
    hooked = h._create_handler
    without_sleeps(h)
    assert h._create_handler is hooked


def test_the_sdk_open_still_has_the_shape_without_sleeps_relies_on() -> None:
    """``without_sleeps`` replaces the client that ``_create_handler`` makes with one whose
    ``client_ready_async`` returns once ready; the SDK's ``_open`` must still create the client
    that way and poll that method. Fails on an SDK whose open changed: read it, update core/sdk/opening.py."""
    for dotted in POLLING_OPENS:
        module, cls, method = dotted.rsplit(".", 2)
        source = inspect.getsource(getattr(getattr(importlib.import_module(module), cls), method))
        assert "self._create_handler(" in source, dotted
        assert "self._handler.client_ready_async()" in source, dotted
    from azure.servicebus._pyamqp.aio._client_async import AMQPClientAsync

    ready = inspect.getsource(AMQPClientAsync.client_ready_async)
    assert "self.auth_complete_async()" in ready and "self._client_ready_async()" in ready
    assert "self._session" in inspect.getsource(AMQPClientAsync.open_async)  # the session links attach on
