"""An entity's status (the administration API's ``Status``): what a disabled queue, topic or
subscription refuses, with Service Bus's condition (``com.microsoft:entity-disabled``, which the
SDKs raise as ``MessagingEntityDisabledError``) and its words.

Disabled refuses sending and receiving; SendDisabled refuses sending (messages already there can be
received); ReceiveDisabled refuses receiving (messages still arrive). Peeking, settling what is
already locked and forwarding into a disabled entity are not checked (docs/emulator.md).
"""

from __future__ import annotations

from ..errors import EntityDisabled
from .entities import Entity, Receivable, Subscription


def check_can_send(target: Entity, namespace: str) -> None:
    status = target.props.status
    if status == "Disabled":
        address = f"sb://{namespace}/{target.name}"
        raise EntityDisabled(f"Messaging entity '{address}' is currently disabled.", entity=target.name)
    if status == "SendDisabled":
        kind = "Queue" if target.kind == "queue" else "Topic"
        raise EntityDisabled(
            f"Messaging entity '{namespace}:{kind}:{target.name}' is currently disabled for Send operations.",
            entity=target.name,
        )


def check_can_receive(source: Receivable, namespace: str) -> None:
    if source.props.status in ("Disabled", "ReceiveDisabled"):
        path = source.path if isinstance(source, Subscription) else source.name
        raise EntityDisabled(f"Messaging entity 'sb://{namespace}/{path}' is currently disabled.", entity=path)
