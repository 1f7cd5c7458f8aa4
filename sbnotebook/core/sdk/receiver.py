"""The SDK boundary at the receiver: locks settled and renewed by the many, given back, and the link's credit.

The public SDK settles and renews one lock per round trip and has no call for the rest:

- settling many locks in one management request (``update-disposition``: ``settle_by_tokens``);
- renewing many locks in one request (``renew-lock`` takes an array of tokens: ``renew_by_tokens``);
- giving a lock back without counting a delivery (AMQP ``released``: ``release``);
- abandoning with properties to modify (AMQP ``modified`` with message annotations);
- taking back the link credit a receive left unused (an AMQP ``flow`` with credit 0:
  ``revoke_credit``), and in receive-and-delete waiting until what the broker sent on it has
  arrived (AMQP drain: ``drain_credit``);
- receiving what is there now, in one round trip whatever the latency (AMQP drain: ``receive_now``);
- forgetting the delivery tags of messages settled over the management link or received
  pre-settled: pyamqp's receiver link keeps every tag until the link itself settles it, so a
  long-lived receiver would grow by one entry per message (``forget_deliveries``).

What it reaches into: the async ``ServiceBusReceiver`` (its management requests and its AMQP
client), pyamqp's receiver link (credit, flow, delivery tags) and a received message's lock
fields; ``sdk.USED_BY`` lists them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("sbnotebook.core.sdk")
_TERMS = {"complete": "complete", "abandon": "abandon", "dead_letter": "dead-letter", "defer": "defer"}


async def settle_by_tokens(
    receiver: Any, action: str, messages: Sequence[Any], *, reason: str | None = None, description: str | None = None
) -> None:
    """Settle every message in one ``update-disposition`` request on the receiver's management link.
    All or nothing: on an exception none of them is marked settled."""
    from azure.servicebus._common.constants import MESSAGE_MGMT_SETTLEMENT_TERM_MAP

    details = None
    if action == "dead_letter":
        details = {"deadletter-reason": reason or "", "deadletter-description": description or ""}
    await receiver._settle_message_via_mgmt_link(
        MESSAGE_MGMT_SETTLEMENT_TERM_MAP[_TERMS[action]],
        [m.lock_token for m in messages],
        dead_letter_details=details,
    )
    for m in messages:
        m._settled = True
    forget_deliveries(receiver, messages)


def forget_deliveries(receiver: Any, messages: Sequence[Any] = ()) -> None:
    """Drop the delivery tags the receiver's link keeps for ``messages`` (all of them on a
    receive-and-delete link). pyamqp adds every arriving tag to ``_received_delivery_tags`` and
    removes it only when the link sends a disposition; a message settled over the management link
    (``settle_by_tokens``) or received pre-settled never has one, so without this a receiver kept
    open grows by one entry per message: about 50 MiB over 10^6 messages in the receive-path purge,
    20-40 MiB over a 10^5 resubmit (tests/core/sdk/test_sdk_memory.py)."""
    from azure.servicebus import ServiceBusReceiveMode

    link = receiver._handler._link if receiver._handler is not None else None
    if link is None:
        return
    tags = link._received_delivery_tags
    if receiver._receive_mode == ServiceBusReceiveMode.RECEIVE_AND_DELETE:
        tags.clear()  # pre-settled: no disposition is ever sent for any of them
        return
    for m in messages:
        tags.discard(m._delivery_tag)


def delivery_tags_held(receiver: Any) -> int:
    """How many delivery tags the receiver's link still keeps (what ``forget_deliveries`` bounds)."""
    link = receiver._handler._link if receiver._handler is not None else None
    return 0 if link is None else len(link._received_delivery_tags)


async def renew_by_tokens(receiver: Any, messages: Sequence[Any]) -> list[dt.datetime]:
    """Renew every lock in one ``renew-lock`` request; returns (and records) the new expiries."""
    from azure.servicebus._common.constants import MGMT_RESPONSE_MESSAGE_EXPIRATION

    reply = await receiver._renew_locks(*[m.lock_token for m in messages])
    expiries = [dt.datetime.fromtimestamp(ms / 1000.0, dt.UTC) for ms in reply[MGMT_RESPONSE_MESSAGE_EXPIRATION]]
    for m, until in zip(messages, expiries, strict=False):
        m._expiry = until
    return expiries


async def release(receiver: Any, message: Any) -> None:
    """Give the lock back without counting a delivery (AMQP ``released``)."""
    await receiver._handler.settle_messages_async(message._delivery_id, message._delivery_tag, "released")
    message._settled = True


async def abandon_with_properties(receiver: Any, message: Any, properties: dict[str, Any]) -> None:
    """Abandon with properties to modify: the wire form Service Bus defines (``modified`` with
    message annotations). The SDK has no public parameter for it."""
    await receiver._handler.settle_messages_async(
        message._delivery_id,
        message._delivery_tag,
        "modified",
        delivery_failed=True,
        undeliverable_here=False,
        message_annotations=dict(properties),
        await_outcome=True,
    )
    message._settled = True


async def revoke_credit(receiver: Any) -> None:
    """Take back the link credit a receive left unused. ``receive_messages`` grants credit for as
    many messages as it asks for and leaves what it did not get. On a link that stays open between
    calls, the broker then delivers whatever arrives next to this link, locked, with nobody
    receiving: every other consumer of the entity sees nothing until the SDK's keep-alive gives the
    messages back, up to 5 s later. Messages already on their way are given back the same way."""
    link = receiver._handler._link if receiver._handler is not None else None
    if link is not None and link.current_link_credit > 0:
        await link.flow(link_credit=0)


def has_credit(receiver: Any) -> bool:
    """Whether the broker may still send on this receiver's link: credit it granted and no message
    has used yet (pyamqp counts each arrival against it)."""
    link = receiver._handler._link if receiver._handler is not None else None  # None: closed
    return link is not None and link.current_link_credit > 0


DRAIN_TIMEOUT = 10.0  # seconds to wait for the broker's answer to a drain (one round trip, normally)


async def drain_credit(receiver: Any, into: list[Any], timeout: float = DRAIN_TIMEOUT) -> bool:
    """Take back the credit a receive left unused and wait until everything the broker sent on it
    has arrived (AMQP ``drain``). The messages that arrived meanwhile are appended to ``into``,
    also when the wait fails; returns whether the broker confirmed that nothing more is on its way.

    In receive-and-delete a message is gone from Service Bus once the broker sends it. When a
    receive's wait ends with credit left, a message may be on the wire; closing the link then
    drops it, and nobody ever sees it (azure-sdk-for-go #24078, azure-sdk-for-java #30958). On a
    drain the broker sends what it still has credit for, uses up the rest and answers with a
    ``flow`` on the link (Azure/azure-amqp ``AmqpLink.ProcessFlow``); frames on a link arrive in
    order, so every transfer sent before that answer is in. pyamqp drops flows on a receiver link
    (azure-sdk-for-python #35104), so the answer is caught here. The wait also ends when every
    unit of credit has brought a message: the broker can send no more than that."""
    if not has_credit(receiver):
        return True
    return await _drained(receiver, receiver._handler._link.current_link_credit, into, timeout)


async def receive_now(receiver: Any, count: int, into: list[Any], timeout: float = DRAIN_TIMEOUT) -> None:
    """Up to ``count`` messages that are there now, appended to ``into``, in one round trip whether
    there are any or not: credit for ``count`` with AMQP drain, so the broker sends what it has, uses
    up the rest and answers (see ``drain_credit``). ``receive_messages`` can only wait a time for
    them: a wait shorter than the round trip returns nothing (the messages it was sent are released
    as they arrive, a delivery of each wasted); a longer one is spent whole when fewer than ``count``
    are there. Not retried: what arrived before a failure is in ``into`` (in receive-and-delete it is
    gone from Service Bus), and the failure is raised as the SDK's exception for it. Not answered
    within ``timeout``, the credit is taken back and what arrived is kept (logged)."""
    receiver._check_live()
    try:
        await receiver._open()  # a pooled link closed since (idle, the connection lost) opens again
        # A receive is on: the SDK keeps what arrives (outside one, it releases a message at once).
        receiver._receive_context.set()
        try:
            answered = await _drained(receiver, count, into, timeout)
        finally:
            receiver._receive_context.clear()
    except Exception as exc:
        raise await receiver._handle_exception(exc) from exc  # raises itself when not retryable
    if not answered:
        await revoke_credit(receiver)
        log.warning(
            "Service Bus did not answer a drain within %.0f s: %d message(s) received; any still on their "
            "way are not in this receive (in peek-lock the SDK releases them as they arrive). Check the connection.",
            timeout,
            len(into),
        )


async def _drained(receiver: Any, credit: int, into: list[Any], timeout: float) -> bool:
    """Credit ``credit`` with drain set, then read until the broker answers (or every unit of credit
    brought a message); what arrived is appended to ``into``. Returns whether it answered."""
    amqp: Any = receiver._handler
    link: Any = amqp._link
    expected = link.delivery_count + credit  # the broker's count once drained
    answered = asyncio.Event()

    async def on_flow(frame: Any) -> None:
        count = frame[5]  # delivery_count (FlowFrame field order)
        if count is not None and count >= expected:
            answered.set()

    link._incoming_flow = on_flow  # the class's own does nothing (see drain_credit)
    try:
        await link.flow(link_credit=credit, drain=True)
        deadline = asyncio.get_running_loop().time() + timeout
        while not answered.is_set() and link.delivery_count < expected:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            # listen() itself, not the client's do_work, which grants new credit when none is left.
            await amqp._connection.listen(wait=min(left, 0.1), batch=max(expected - link.delivery_count, 1))
    finally:
        del link._incoming_flow
        while not amqp._received_messages.empty():
            into.append(receiver._build_received_message(amqp._received_messages.get_nowait()))
            amqp._received_messages.task_done()
    if not (answered.is_set() or link.delivery_count >= expected):
        return False
    link.delivery_count = expected
    link.current_link_credit = 0
    return True


def is_peeked(message: Any) -> bool:
    """Peeked messages carry no lock (their lock fields may raise)."""
    return bool(getattr(message, "_is_peeked_message", False))
