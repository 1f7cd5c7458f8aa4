"""The README's main job runs and accounts for every message: its verdict is what the broker holds."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbnotebook import demo
from sbnotebook.cli import main
from sbnotebook.emulator import Emulator
from tests.helpers import QuickCloseClient


def test_demo_runs_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "order-4: ValidationFailed (quantity must be positive)" in out
    assert "Every message is accounted for: 3 completed, 1 dead-lettered." in out
    # Every step goes through the settlement library and prints its Report summary line.
    assert "send orders: 4 sent of 4" in out
    for line in (
        "complete orders: 1 completed of 1",
        "abandon orders: 1 abandoned of 1",
        "defer orders: 1 deferred of 1",
        "dead-letter orders: 1 dead-lettered of 1",
    ):
        assert line in out
    assert out.count("complete orders: 1 completed of 1") == 3  # order-1, then order-2 and order-3 later
    assert "SAS_KEY_VALUE" not in out  # the demo never prints the key


def _state(client: ServiceBusClient) -> tuple[list[str], list[tuple[str, str]]]:
    """What 'orders' holds, read with the SDK: the message ids left, and (id, reason) in its DLQ."""
    with client.get_queue_receiver("orders") as r:
        left = [str(m.message_id) for m in r.peek_messages(max_message_count=100)]
    with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
        dead = [(str(m.message_id), str(m.dead_letter_reason)) for m in r.peek_messages(max_message_count=100)]
    return left, dead


def test_the_verdict_is_the_broker_state(capsys: pytest.CaptureFixture[str]) -> None:
    with Emulator() as emu, QuickCloseClient.from_connection_string(emu.connection_string) as client:
        assert demo.run_demo(emu) == 0
        assert _state(client) == ([], [("order-4", "ValidationFailed")])
        assert emu.broker.counts("orders") == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1}
    lines = capsys.readouterr().out.splitlines()
    (verdict,) = [x for x in lines if "accounted for" in x]
    assert verdict.startswith("Done in ") and verdict.endswith("3 completed, 1 dead-lettered.")


def test_an_unexpected_state_is_said_and_exits_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """A dead-letter queue polluted before the run: the steps still go through, the verdict is read
    from the broker, says what it holds, and the exit code is 1."""
    with Emulator() as emu, QuickCloseClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("stray", message_id="stray-1"))
        with client.get_queue_receiver("orders") as receiver:
            for m in receiver.receive_messages(max_message_count=1, max_wait_time=5):
                receiver.dead_letter_message(m, reason="earlier")
        assert demo.run_demo(emu) == 1
        assert _state(client)[1] == [("stray-1", "earlier"), ("order-4", "ValidationFailed")]
    out = capsys.readouterr().out
    assert "accounted for" not in out
    assert (
        "UNEXPECTED STATE in " in out
        and "Of 4 sent, 'orders' holds 0 active, 0 deferred, 0 scheduled and 2 dead-lettered (order-4, stray-1)" in out
    )


def test_check_reads_what_is_left(capsys: pytest.CaptureFixture[str]) -> None:
    """The check alone, on an entity holding messages the demo would have settled: not accounted for."""
    with Emulator() as emu, QuickCloseClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"o{i}", message_id=f"order-{i}") for i in (1, 2, 3, 4)])
        ok, verdict = demo.check(emu, sent=4)
        assert not ok and "holds 4 active, 0 deferred, 0 scheduled and 0 dead-lettered (none)" in verdict
        with client.get_queue_receiver("orders") as receiver:
            got = receiver.receive_messages(max_message_count=4, max_wait_time=5)
            for m in got:
                if m.message_id == "order-4":
                    receiver.dead_letter_message(m, reason="r")
                else:
                    receiver.complete_message(m)
        assert demo.check(emu, sent=4) == (True, "Every message is accounted for: 3 completed, 1 dead-lettered.")
        assert demo.check(emu, sent=5)[0] is False  # one more sent than the broker accounts for
