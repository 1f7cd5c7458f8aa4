"""Entity addresses from plain strings.

"orders"                                   a queue
"events/subscriptions/audit"               a topic subscription
"orders/$deadletterqueue"                  a dead-letter queue (also "orders/$dlq")
"events/subscriptions/audit/$deadletterqueue"
"orders/$transfer/$deadletterqueue"        the transfer dead-letter queue
"events"                                   a topic (for sending)

In the notebook, ``NAME:ENTITY`` names an entity of a named connection (``prod:orders/$dlq``):
:func:`split_address` reads that prefix; the rest is an entity address as above. Core functions take
the entity alone and the connection as ``connection=``.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

from .errors import EntityNameError, InvalidInputError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,259}$")
CONNECTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
"""What a connection's name may be (``%sb_connect --as NAME``, the ``NAME`` of ``NAME:ENTITY``): a
letter or ``_`` first, then letters, digits, ``_`` and ``-``, 64 characters at most."""
SubQueue = Literal["dead_letter", "transfer_dead_letter"] | None
# The one spelling of the sub-queue above core (tests/core/test_one_address.py): a path's dead-letter form
# is ``EntityPath.dead_letter``; help texts name the suffix through this constant.
DEAD_LETTER_QUEUE = "$deadletterqueue"
"""The suffix of a dead-letter queue's address: ``orders/$deadletterqueue``,
``events/subscriptions/audit/$deadletterqueue``."""


@dataclass(frozen=True)
class EntityPath:
    """An entity's address, parsed once: a queue or topic ``name``, a ``subscription`` of that topic,
    and a ``sub_queue`` (its dead-letter queue, or its transfer dead-letter queue).
    ``EntityPath.parse("events/subscriptions/audit/$deadletterqueue")``; ``str()`` gives the address back."""

    name: str  # queue or topic
    subscription: str | None = None
    sub_queue: SubQueue = None

    @classmethod
    def parse(cls, text: str | EntityPath) -> EntityPath:
        if isinstance(text, EntityPath):
            return text
        if not isinstance(text, str) or not text.strip():
            raise EntityNameError("An entity name is required, for example 'orders' or 'events/subscriptions/audit'.")
        if ":" in text:
            raise EntityNameError(
                f"{text!r} has a ':': NAME:ENTITY names a connection's entity in the notebook; "
                "here give the entity alone and the connection as connection=."
            )
        parts = [p for p in text.strip().strip("/").split("/")]
        if any(p == "" for p in parts):
            raise EntityNameError(f"{text!r} has an empty path segment.")
        sub_queue: SubQueue = None
        lowered = [p.lower() for p in parts]
        if lowered[-1] in (DEAD_LETTER_QUEUE, "$dlq"):
            if len(lowered) >= 2 and lowered[-2] == "$transfer":
                sub_queue = "transfer_dead_letter"
                parts, lowered = parts[:-2], lowered[:-2]
            else:
                sub_queue = "dead_letter"
                parts, lowered = parts[:-1], lowered[:-1]
        if len(parts) == 1:
            path = cls(parts[0], None, sub_queue)
        elif len(parts) == 3 and lowered[1] == "subscriptions":
            path = cls(parts[0], parts[2], sub_queue)
        else:
            raise EntityNameError(
                f"{text!r} is not an entity address. Use 'queue', 'topic/subscriptions/name', "
                "optionally followed by '/$deadletterqueue'."
            )
        for name in (path.name, path.subscription):
            if name is not None and not _NAME.match(name):
                raise EntityNameError(
                    f"{name!r} is not a valid entity name (letters, digits, '.', '-', '_'; at most 260)."
                )
        return path

    @property
    def is_subscription(self) -> bool:
        return self.subscription is not None

    @property
    def is_dead_letter(self) -> bool:
        return self.sub_queue is not None

    @property
    def parent(self) -> EntityPath:
        """The entity without its dead-letter sub-queue."""
        return EntityPath(self.name, self.subscription, None)

    @property
    def dead_letter(self) -> EntityPath:
        """The entity's dead-letter queue (of a dead-letter queue: the entity's, not its transfer one)."""
        return EntityPath(self.name, self.subscription, "dead_letter")

    @property
    def transfer_dead_letter(self) -> EntityPath:
        """The entity's transfer dead-letter queue (messages that could not be forwarded)."""
        return EntityPath(self.name, self.subscription, "transfer_dead_letter")

    def handler_names(self) -> tuple[str, str | None]:
        """(queue or topic, subscription) as the SDK's handlers take them, the sub-queue appended in
        the SDK's own spelling (``/$DeadLetterQueue``: Service Bus ignores case, the wire keeps the SDK's)."""
        tail = {"dead_letter": "/$DeadLetterQueue", "transfer_dead_letter": "/$Transfer/$DeadLetterQueue"}
        suffix = tail.get(self.sub_queue or "", "")
        if self.subscription is None:
            return self.name + suffix, None
        return self.name, self.subscription + suffix

    def __str__(self) -> str:
        base = f"{self.name}/subscriptions/{self.subscription}" if self.subscription else self.name
        if self.sub_queue == "dead_letter":
            return f"{base}/{DEAD_LETTER_QUEUE}"
        if self.sub_queue == "transfer_dead_letter":
            return f"{base}/$transfer/{DEAD_LETTER_QUEUE}"
        return base


def not_dead_letter(entity: str | EntityPath, instead: str) -> EntityPath:
    """``entity``'s path, refused (``InvalidInputError``) when it is a dead-letter queue, for what only
    its entity has (properties, sessions): ``instead`` says where to go, ``{parent}`` naming the entity."""
    path = EntityPath.parse(entity)
    if path.sub_queue is not None:
        raise InvalidInputError(f"{path} is a dead-letter queue: " + instead.format(parent=path.parent))
    return path


def split_address(text: str) -> tuple[str | None, EntityPath]:
    """``"NAME:ENTITY"`` as (``"NAME"``, the entity's path); ``"ENTITY"`` as (None, its path). A colon
    anywhere but right after a connection name, a bad name or a missing entity is an
    ``EntityNameError`` saying which."""
    if not isinstance(text, str) or ":" not in text:
        return None, EntityPath.parse(text)
    name, _, rest = text.strip().partition(":")
    if not name:
        raise EntityNameError(
            f"{text!r}: a connection name goes before the ':' (NAME:ENTITY, for example prod:orders)."
        )
    if "/" in name:
        raise EntityNameError(
            f"{text!r} has a ':' in the entity address: a colon only follows a connection name at the start "
            "(NAME:ENTITY, for example prod:orders/$deadletterqueue)."
        )
    if not CONNECTION_NAME.match(name):
        raise EntityNameError(
            f"{name!r} is not a connection name (letters, digits, '_' and '-', starting with a letter; at most 64)."
        )
    if ":" in rest:
        raise EntityNameError(f"{text!r} has more than one ':' (NAME:ENTITY, for example prod:orders).")
    if not rest.strip():
        raise EntityNameError(
            f"{text!r} names connection {name!r} but no entity after the ':' (for example {name}:orders)."
        )
    return name, EntityPath.parse(rest)


def entity_name(value: Any) -> str | None:
    """A forwarding target (``ForwardTo``) by the entity it names: Service Bus answers the URL
    ``sb://{namespace}/{entity}``, the kit and the topology format name the entity."""
    if not value:
        return None
    text = str(value)
    return urllib.parse.urlsplit(text).path.strip("/") if "://" in text else text
