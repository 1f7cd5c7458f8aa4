"""``sbnotebook demo``: a guided run on the embedded emulator, narrated as it goes.

Starts the emulator, sends a few orders, peeks them, then receives in peek-lock
and settles each one a different way (complete, abandon, defer, dead-letter),
and shows where every message ended up. Uses the official SDK, exactly as a
notebook would against Azure.
"""

from __future__ import annotations

import json
import time

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus import ServiceBusReceiveMode as Mode

from .emulator import Emulator

ORDERS = [
    {"order": 1, "item": "coffee", "qty": 2},
    {"order": 2, "item": "tea", "qty": 1},
    {"order": 3, "item": "cake", "qty": 12},
    {"order": 4, "item": "???", "qty": -1},
]


def _say(text: str = "") -> None:
    print(text, flush=True)


def run_demo() -> int:
    started = time.monotonic()
    _say("sbnotebook demo: Azure Service Bus semantics on the embedded emulator\n")
    with Emulator() as emu:
        _say(f"1. Emulator listening on {emu.host}:{emu.port} (AMQP 1.0; the official SDK connects with")
        _say("   UseDevelopmentEmulator=true, exactly as it connects to Azure).")
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                batch = sender.create_message_batch()
                for order in ORDERS:
                    batch.add_message(
                        ServiceBusMessage(
                            json.dumps(order),
                            content_type="application/json",
                            subject="order-created",
                            message_id=f"order-{order['order']}",
                            application_properties={"item": str(order["item"])},
                        )
                    )
                sender.send_messages(batch)
            _say(f"2. Sent {len(ORDERS)} orders to queue 'orders' as one batch; the broker confirmed it.")

            with client.get_queue_receiver("orders", max_wait_time=3) as receiver:
                peeked = receiver.peek_messages(max_message_count=10, sequence_number=1)
                _say(f"3. Peeked {len(peeked)} messages (no locks taken, delivery counts untouched):")
                for m in peeked:
                    _say(f"     seq {m.sequence_number}  {m.message_id:<8}  {m}")

                locked = receiver.receive_messages(max_message_count=4, max_wait_time=3)
                _say(
                    f"4. Received {len(locked)} in peek-lock; each is locked until about "
                    f"{locked[0].locked_until_utc:%H:%M:%S} UTC and settled after the 'work':"
                )
                by_id = {m.message_id: m for m in locked}
                receiver.complete_message(by_id["order-1"])
                _say("     order-1  complete     -> removed: the work is done")
                receiver.abandon_message(by_id["order-2"])
                _say("     order-2  abandon      -> back in the queue, delivery count raised")
                receiver.defer_message(by_id["order-3"])
                deferred_seq = by_id["order-3"].sequence_number or 0
                _say(f"     order-3  defer        -> set aside; only fetchable by sequence number {deferred_seq}")
                receiver.dead_letter_message(
                    by_id["order-4"], reason="ValidationFailed", error_description="quantity must be positive"
                )
                _say("     order-4  dead-letter  -> moved to the dead-letter queue with a reason")

                (retry,) = receiver.receive_messages(max_message_count=1, max_wait_time=3)
                _say(f"5. order-2 came back with delivery count {retry.delivery_count}; completing it now.")
                receiver.complete_message(retry)
                (fetched,) = receiver.receive_deferred_messages([deferred_seq])
                receiver.complete_message(fetched)
                _say(f"   Fetched deferred order-3 by sequence number {deferred_seq} and completed it.")

            with client.get_queue_receiver(
                "orders",
                sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                receive_mode=Mode.PEEK_LOCK,
                max_wait_time=3,
            ) as dlq:
                dead = dlq.peek_messages(max_message_count=10, sequence_number=1)
                _say(f"6. Dead-letter queue holds {len(dead)} message(s):")
                for m in dead:
                    _say(f"     {m.message_id}: {m.dead_letter_reason} ({m.dead_letter_error_description})")

        counts = emu.broker.counts("orders")
        _say(f"7. Final state of 'orders': {counts}")
        ok = counts == {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1}
    _say(
        f"\n{'Done' if ok else 'UNEXPECTED STATE'} in {time.monotonic() - started:.1f} s. Every message is "
        "accounted for: 3 completed, 1 dead-lettered."
    )
    _say("Next: the tutorials in notebooks/ (01_quickstart.ipynb first) run on this same embedded emulator:")
    _say("  .venv/bin/pip install -e '.[dev]' && .venv/bin/jupyter lab notebooks/01_quickstart.ipynb")
    _say("or run the emulator yourself with `sbnotebook emulator` and point any SDK at the printed")
    _say("connection string; see docs/emulator.md.")
    return 0 if ok else 1
