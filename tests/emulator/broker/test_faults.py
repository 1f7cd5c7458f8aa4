"""Fault injection: the failures the kit must handle, produced on demand."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessagingEntityDisabledError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
    SessionLockLostError,
)

from sbnotebook.emulator import Emulator, TopologyError
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import QuickCloseClient, drain, send
from tests.processes import run_cli_emulator
from tests.waiting import wait_until

# These tests run on the kit's own pytest plugin (docs/testing.md): the suite's topology, a fresh
# namespace per test; the marker makes conftest's emulator (and so its clients) the plugin's.
pytestmark = pytest.mark.servicebus_topology(config=TEST_TOPOLOGY)


def test_rejected_sends_carry_condition_and_tracking_id(emulator: Emulator) -> None:
    """Rule: a busy server refuses with com.microsoft:server-busy and a tracking id; later sends succeed."""
    emulator.reject_sends("q", 2, "server-busy")
    with QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        with c.get_queue_sender("q") as s:
            for _ in range(2):
                with pytest.raises(ServiceBusServerBusyError) as err:
                    s.send_messages(ServiceBusMessage("x"))
                assert "TrackingId:" in str(err.value)
            s.send_messages(ServiceBusMessage("third"))
        assert [str(m) for m in drain(c, "q")] == ["third"]


def test_sdk_retries_server_busy_on_its_own(client: ServiceBusClient, emulator: Emulator) -> None:
    """Rule: server-busy is retryable; the SDK's default policy gets the message through."""
    emulator.reject_sends("q", 1, "server-busy")
    send(client, "q", "eventually")
    assert [str(m) for m in drain(client, "q")] == ["eventually"]


@pytest.mark.parametrize(
    ("condition", "error"),
    [("quota-exceeded", ServiceBusQuotaExceededError), ("entity-disabled", MessagingEntityDisabledError)],
)
def test_other_conditions_map_to_their_sdk_errors(emulator: Emulator, condition: str, error: type) -> None:
    emulator.reject_sends("q", 5, condition)
    with QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        with c.get_queue_sender("q") as s, pytest.raises(error):
            s.send_messages(ServiceBusMessage("x"))


def test_lost_locks_fail_settlement_without_raising_delivery_count(
    quick_client: ServiceBusClient, emulator: Emulator
) -> None:
    """Rule: after a service-side lock loss, settling fails with MessageLockLostError and the message is
    delivered again with the same delivery count."""
    send(quick_client, "q", "a", "b")
    with quick_client.get_queue_receiver("q", max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=2, max_wait_time=3)
        assert emulator.lose_locks("q") == 2
        with pytest.raises(MessageLockLostError):
            r.complete_message(got[0])
        again = r.receive_messages(max_message_count=2, max_wait_time=3)
        assert sorted(str(m) for m in again) == ["a", "b"]
        assert [m.delivery_count for m in again] == [0, 0]
        for m in again:
            r.complete_message(m)


def test_lost_session_locks_fail_settlement_and_the_next_receive(
    quick_client: ServiceBusClient, emulator: Emulator
) -> None:
    """Rule: a session lock that ends early (lapsed, or moved by a service update) fails settling
    with SessionLockLostError and detaches the holder's link at its next receive; the session can be
    accepted again and its messages come back, each delivery counted."""
    with quick_client.get_queue_sender("sq60") as s:
        s.send_messages([ServiceBusMessage(b, session_id="s") for b in ("a", "b")])
    with quick_client.get_queue_receiver("sq60", session_id="s", max_wait_time=3) as r:
        got = r.receive_messages(max_message_count=2, max_wait_time=3)
        assert len(got) == 2
        assert emulator.lose_session_locks("sq60") == 1
        assert emulator.lose_session_locks("sq60") == 0  # nothing held any more
        with pytest.raises(SessionLockLostError):
            r.complete_message(got[0])
        with pytest.raises(SessionLockLostError):
            r.receive_messages(max_message_count=2, max_wait_time=3)
    with quick_client.get_queue_receiver("sq60", session_id="s", max_wait_time=3) as r:
        again = r.receive_messages(max_message_count=2, max_wait_time=3)
        assert sorted(str(m) for m in again) == ["a", "b"]
        assert [m.delivery_count for m in again] == [1, 1]
        for m in again:
            r.complete_message(m)
    assert emulator.broker.counts("sq60")["active"] == 0


def test_connection_dropped_after_n_deliveries(emulator: Emulator) -> None:
    """The network fails mid-batch: the connection goes without an AMQP close; its locks end when
    they expire (1 s here), as on Service Bus, each counting a delivery attempt."""
    emulator.drop_connections_after("short", 2)
    with QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        send(c, "short", *[f"m{i}" for i in range(5)])
        with c.get_queue_receiver("short", max_wait_time=2, prefetch_count=0) as r:
            with contextlib.suppress(Exception):  # the SDK may or may not notice before returning
                r.receive_messages(max_message_count=5, max_wait_time=2)
    wait_until(lambda: emulator.broker.counts("short")["active"] == 5 and not emulator.broker._locks)
    with emulator.broker.lock:
        counts = sorted(m.delivery_count for m in emulator.broker.entity("short").store.messages.values())
    assert counts == [0, 0, 0, 1, 1]  # the two delivered on the dropped connection count an attempt


def test_latency_delays_every_reply_but_pipelining_overlaps_it() -> None:
    """Simulated distance: a sequential send costs a round trip; concurrent sends overlap."""
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    # 300 ms, not 100: the SDK's own overhead (it polls in 50 ms steps) does not shrink with the
    # latency, and on a busy host it made 5 overlapped 100 ms sends take 0.40 s against 0.52 s
    # sequential (a contended suite run failed so); at 300 ms the overlap still shows plainly.
    latency = 0.3
    with Emulator(TEST_TOPOLOGY, latency_ms=latency * 1000) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string) as c, c.get_queue_sender("q") as s:
            start = time.perf_counter()
            for i in range(5):
                s.send_messages(ServiceBusMessage(f"seq-{i}"))
            sequential = time.perf_counter() - start
        assert sequential >= 5 * latency

        async def concurrent() -> float:
            async with AsyncClient.from_connection_string(emu.connection_string) as ac:
                async with ac.get_queue_sender("q") as a:
                    await a.send_messages(ServiceBusMessage("warm"))
                    t0 = time.perf_counter()
                    await asyncio.gather(*(a.send_messages(ServiceBusMessage(f"c-{i}")) for i in range(5)))
                    return time.perf_counter() - t0

        overlapped = asyncio.run(concurrent())
        assert overlapped < sequential * 0.6
        assert emu.broker.counts("q")["active"] == 11


def test_slow_entity_is_slow_and_others_are_not(emulator: Emulator) -> None:
    emulator.slow_down("q", latency_ms=1000)
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        with c.get_queue_sender("q") as slow, c.get_queue_sender("dedup") as fast:
            t0 = time.perf_counter()
            slow.send_messages(ServiceBusMessage("x"))
            t1 = time.perf_counter()
            fast.send_messages(ServiceBusMessage("y"))
            t2 = time.perf_counter()
    assert t1 - t0 >= 1.0
    assert t2 - t1 < (t1 - t0) - 0.5  # against the slow send, not a fixed figure: load slows both alike


def test_faults_from_the_topology_file() -> None:
    topo = copy.deepcopy(TEST_TOPOLOGY)
    topo["UserConfig"]["Namespaces"][0]["Faults"] = [
        {"Entity": "q", "RejectSends": {"Count": 1, "Condition": "QuotaExceeded"}}
    ]
    with Emulator(topo) as emu:
        with QuickCloseClient.from_connection_string(emu.connection_string, retry_total=0) as c:
            with c.get_queue_sender("q") as s:
                with pytest.raises(ServiceBusQuotaExceededError):
                    s.send_messages(ServiceBusMessage("x"))
                s.send_messages(ServiceBusMessage("y"))
    topo["UserConfig"]["Namespaces"][0]["Faults"] = [{"Entity": "q", "RejectSends": {"Condition": "Nope"}}]
    with pytest.raises(TopologyError, match="unknown fault condition"):
        Emulator(topo)


def test_cli_fault_flags_are_checked() -> None:
    result = run_cli_emulator("--port", "0", "--reject-sends", "nosuch=1")
    assert result.returncode == 2
    assert "nosuch" in result.stderr


def test_latency_delays_the_administration_api_too() -> None:
    """Simulated distance applies to every reply on the AMQP port, HTTP (admin) ones included."""
    from sbnotebook.core.sdk.admin import emulator_admin_client

    with Emulator(latency_ms=1000) as emu, emulator_admin_client(emu.connection_string) as admin:
        admin.get_queue_runtime_properties("orders")
        t0 = time.monotonic()
        admin.get_queue_runtime_properties("orders")
        slow = time.monotonic() - t0
        assert slow >= 1.0
        emu.latency_ms = 0
        t0 = time.monotonic()
        admin.get_queue_runtime_properties("orders")
        # Against the call with latency, not a fixed figure: a loaded machine slows both alike, and
        # only the second second is the latency's.
        assert time.monotonic() - t0 < slow - 0.5
