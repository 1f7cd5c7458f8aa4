"""An AMQP disposition from a receiver onto the broker's settlement: accepted completes, modified
abandons or defers (undeliverable), rejected dead-letters (reason and description from the error's
info), released gives the lock back. An error is answered on the delivery, rejected."""

from __future__ import annotations

import uuid

from proton import Delivery

from ..broker.broker import Broker
from ..broker.store import MessageStore
from ..errors import BrokerError
from .terms import error_condition, string_keys


def settle(broker: Broker, delivery: Delivery, token: uuid.UUID | None, store: MessageStore | None) -> None:
    """Apply the receiver's outcome for ``delivery`` (lock ``token``) and settle it."""
    state = delivery.remote_state
    if token is None or (delivery.settled and state == 0):
        return
    try:
        if state == Delivery.ACCEPTED:
            broker.complete(token, store=store)
        elif state == Delivery.MODIFIED:
            remote = delivery.remote
            props = string_keys(remote.annotations)
            if remote.undeliverable:
                broker.defer(token, props, store=store)
            else:
                broker.abandon(token, props, store=store)
            delivery.local.failed = remote.failed
            delivery.local.undeliverable = remote.undeliverable
        elif state == Delivery.REJECTED:
            cond = delivery.remote.condition
            info = string_keys(cond.info if cond else None) or {}
            broker.dead_letter(
                token,
                info.get("DeadLetterReason"),
                info.get("DeadLetterErrorDescription"),
                store=store,
            )
        elif state == Delivery.RELEASED:
            broker.release(token)
        else:
            return
        if not delivery.settled:
            delivery.update(state)
    except BrokerError as exc:
        if delivery.settled:
            return
        delivery.local.condition = error_condition(exc)
        delivery.update(Delivery.REJECTED)
    delivery.settle()
