"""``sbnotebook demo``: a guided run on the embedded emulator, narrated as it goes.

Starts the emulator, sends a few orders, peeks them, then receives in peek-lock
and settles each one a different way (complete, abandon, defer, dead-letter),
and shows where every message ended up. Goes through the settlement library
(``sbnotebook.core``) on one live connection, exactly as a notebook would
against Azure; the library drives the official SDK. Its verdict is read from the
broker at the end (``check``), not assumed: an unexpected state exits non-zero.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from typing import Any

from . import core
from .about import next_steps, versions_line
from .emulator import Emulator

ORDERS = [
    {"order": 1, "item": "coffee", "qty": 2},
    {"order": 2, "item": "tea", "qty": 1},
    {"order": 3, "item": "cake", "qty": 12},
    {"order": 4, "item": "???", "qty": -1},
]


def _say(text: str = "") -> None:
    print(text, flush=True)


def _record(order: dict[str, object]) -> dict[str, object]:
    """An order as a record of the one schema: core.send applies its message fields."""
    return {
        "body": json.dumps(order),
        "content_type": "application/json",
        "subject": "order-created",
        "message_id": f"order-{order['order']}",
        "application_properties": {"item": str(order["item"])},
    }


def _narrate(conn: core.LiveConnection) -> int:
    """The demo's steps 2 to 6; returns how many orders the broker confirmed as sent."""
    sent = core.send("orders", [_record(o) for o in ORDERS], connection=conn)
    sent.raise_for_failures()
    _say(f"2. Sent {len(ORDERS)} orders to queue 'orders'; the broker confirmed each one ({sent.summary()}).")

    peeked = core.peek("orders", max_messages=10, connection=conn)
    _say(f"3. Peeked {len(peeked)} messages (no locks taken, delivery counts untouched):")
    for r in peeked:
        _say(f"     seq {r['sequence_number']}  {r['message_id']:<8}  {r['body_text']}")

    batch = core.receive("orders", max_messages=len(ORDERS), wait_seconds=3, connection=conn)
    with batch:
        left = min(x for x in batch.seconds_left() if x is not None)
        _say(
            f"4. Received {len(batch)} in peek-lock; each is locked for about {left:.0f} s more and settled "
            "after the 'work' (each settlement returns a Report, one outcome per message):"
        )
        row = {r["message_id"]: i for i, r in enumerate(batch.records)}
        _say("     order-1  complete     -> removed: the work is done")
        _say(f"              {batch.complete(row['order-1'])}")
        _say("     order-2  abandon      -> back in the queue, delivery count raised")
        _say(f"              {batch.abandon(row['order-2'])}")
        deferred = batch.defer(row["order-3"])
        deferred_seq = deferred.outcomes[0].sequence_number or 0
        _say(f"     order-3  defer        -> set aside; only fetchable by sequence number {deferred_seq}")
        _say(f"              {deferred}")
        dead = batch.dead_letter(row["order-4"], reason="ValidationFailed", description="quantity must be positive")
        _say("     order-4  dead-letter  -> moved to the dead-letter queue with a reason")
        _say(f"              {dead}")

    with core.receive("orders", max_messages=1, wait_seconds=3, connection=conn) as retry:
        count = retry.records[0]["delivery_count"]
        _say(f"5. order-2 came back with delivery count {count}; completing it now: {retry.complete()}")
    with core.receive_deferred("orders", [deferred_seq], connection=conn) as fetched:
        _say(f"   Fetched deferred order-3 by sequence number {deferred_seq}: {fetched.complete()}")

    dlq = core.peek(core.EntityPath("orders").dead_letter, max_messages=10, connection=conn)
    _say(f"6. Dead-letter queue holds {len(dlq)} message(s):")
    for r in dlq:
        _say(f"     {r['message_id']}: {r['dead_letter_reason']} ({r['dead_letter_error_description']})")
    return sent.count("sent")


EXPECTED_COUNTS = {"active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1}
EXPECTED_DEAD = ["order-4"]


def _dead_lettered_ids(emu: Emulator, entity: str) -> list[str]:
    """The message ids in ``entity``'s dead-letter queue, peeked with the SDK on a client of its own."""
    with (
        core.sdk_client(emu.connection_string) as client,
        client.get_queue_receiver(entity, sub_queue="deadletter") as receiver,  # ServiceBusSubQueue.DEAD_LETTER
    ):
        found: list[Any] = []
        while page := receiver.peek_messages(
            max_message_count=100, sequence_number=found[-1].sequence_number + 1 if found else 0
        ):
            found.extend(page)
    return sorted(str(m.message_id) for m in found)


def check(emu: Emulator, *, sent: int, entity: str = "orders") -> tuple[bool, str]:
    """The demo's verdict from the broker's final state of ``entity``, read on its own (the broker's
    counts, and the dead-letter queue peeked with the SDK), never from the Reports the run printed.
    Every message sent is accounted for when none is left (active, deferred or scheduled) and the
    dead-letter queue holds order-4 alone: the others were completed, as nothing else removes a
    message here (no time to live, no receive-and-delete). Anything else is said as it is."""
    counts = emu.broker.counts(entity)
    dead = _dead_lettered_ids(emu, entity)
    removed = sent - counts["active"] - counts["deferred"] - counts["scheduled"] - counts["dead_letter"]
    if counts == EXPECTED_COUNTS and dead == EXPECTED_DEAD and removed == len(ORDERS) - len(EXPECTED_DEAD):
        return True, f"Every message is accounted for: {removed} completed, {counts['dead_letter']} dead-lettered."
    return False, (
        f"Of {sent} sent, '{entity}' holds {counts['active']} active, {counts['deferred']} deferred, "
        f"{counts['scheduled']} scheduled and {counts['dead_letter']} dead-lettered ({', '.join(dead) or 'none'}); "
        f"expected none left and {', '.join(EXPECTED_DEAD)} dead-lettered."
    )


def run_demo(emulator: Emulator | None = None) -> int:
    """The demo on a fresh embedded emulator (or on ``emulator``, left running: a test reads it after);
    0 when the broker holds what the demo expects, else 1."""
    started = time.monotonic()
    _say("sbnotebook demo: Azure Service Bus semantics on the embedded emulator")
    _say(f"({versions_line()})\n")
    with Emulator() if emulator is None else nullcontext(emulator) as emu:
        _say(f"1. Emulator listening on {emu.host}:{emu.port} (AMQP 1.0; the official SDK connects with")
        _say("   UseDevelopmentEmulator=true, exactly as it connects to Azure).")
        with core.connect(emu.connection_string) as conn:  # one live connection for the whole run
            sent = _narrate(conn)
        _say(f"7. Final state of 'orders': {emu.broker.counts('orders')}")
        ok, verdict = check(emu, sent=sent)
    _say(f"\n{'Done' if ok else 'UNEXPECTED STATE'} in {time.monotonic() - started:.1f} s. {verdict}")
    for line in next_steps():  # commands that work for how the kit was installed (sbnotebook/about.py)
        _say(line)
    return 0 if ok else 1
