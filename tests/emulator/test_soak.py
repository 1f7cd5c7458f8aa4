"""Soak: many senders and competing receivers, random settlement and lock expiry.
At the end every message sent is accounted for exactly once."""

from __future__ import annotations

import random
import threading
import time

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import MessageLockLostError

from sbnotebook.emulator import Emulator
from sbnotebook.emulator.broker.model import MessageState
from tests.helpers import QuickCloseClient

SOAK_TOPOLOGY = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "soak",
                "Queues": [{"Name": "work", "Properties": {"LockDuration": "PT1S", "MaxDeliveryCount": 4}}],
            }
        ]
    }
}
MESSAGES = 5000
SENDERS = 4
RECEIVERS = 6


@pytest.mark.slow
def test_soak_accounts_for_every_message_exactly_once() -> None:
    rng = random.Random(20261122)
    completed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    with Emulator(SOAK_TOPOLOGY) as emu:
        conn = emu.connection_string

        def sender(k: int) -> None:
            try:
                with QuickCloseClient.from_connection_string(conn) as c, c.get_queue_sender("work") as s:
                    ids = [f"m{i}" for i in range(k, MESSAGES, SENDERS)]
                    for start in range(0, len(ids), 25):
                        s.send_messages([ServiceBusMessage(i, message_id=i) for i in ids[start : start + 25]])
            except BaseException as exc:
                errors.append(exc)

        def receiver(seed: int) -> None:
            local = random.Random(seed)
            try:
                with QuickCloseClient.from_connection_string(conn) as c:
                    with c.get_queue_receiver("work", max_wait_time=1) as r:
                        while not stop.is_set():
                            for m in r.receive_messages(max_message_count=20, max_wait_time=1):
                                roll = local.random()
                                try:
                                    if roll < 0.55:
                                        r.complete_message(m)
                                        with lock:
                                            completed.append(str(m))
                                    elif roll < 0.75:
                                        r.abandon_message(m)
                                    elif roll < 0.82:
                                        r.dead_letter_message(m, reason="soak")
                                    elif roll < 0.88:
                                        r.defer_message(m)
                                    # else: do nothing and let the 1 s lock expire
                                except MessageLockLostError:
                                    pass  # it expired first: it will come back, nothing to record
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(SENDERS)]
        threads += [threading.Thread(target=receiver, args=(rng.random(),)) for _ in range(RECEIVERS)]
        started = time.monotonic()
        for t in threads:
            t.start()
        broker = emu.broker
        entity = broker.entity("work")
        while time.monotonic() - started < 300:
            time.sleep(0.5)
            with broker.lock:
                sent_done = all(not t.is_alive() for t in threads[:SENDERS])
                settled = not broker._locks and not any(
                    m.state is MessageState.ACTIVE for m in entity.store.messages.values()
                )
            if sent_done and settled:
                break
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors
        with broker.lock:
            deferred = [m.data.message_id for m in entity.store.messages.values() if m.state is MessageState.DEFERRED]
            active = [m.data.message_id for m in entity.store.messages.values() if m.state is MessageState.ACTIVE]
            dead = [m.data.message_id for m in entity.dead_letter.messages.values()]
            reasons = {m.application_properties.get("DeadLetterReason") for m in entity.dead_letter.messages.values()}

    everything = completed + deferred + active + dead
    assert len(everything) == MESSAGES, "a message was lost or settled twice"
    assert set(everything) == {f"m{i}" for i in range(MESSAGES)}
    assert not active
    assert reasons <= {"soak", "MaxDeliveryCountExceeded"}
    assert completed and deferred and dead  # every path was exercised
