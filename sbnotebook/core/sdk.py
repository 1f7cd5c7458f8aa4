"""The SDK boundary: every use of a private ``azure-servicebus`` name lives in the ``sdk_*`` modules.

The public SDK has no call for a few things Service Bus itself offers, and the kit needs them. Each
part reaches into one thing the SDK makes and pins the SDK lines it relies on:

- ``sdk_receiver.py``, the receiver: many locks settled or renewed in one request, a lock given back
  (``released``) or abandoned with properties (``modified``), the link credit a receive left unused
  taken back or drained, delivery tags forgotten;
- ``sdk_open.py``, a handler's open and close: opened without the SDK's 50 ms sleeps with the
  ``$management`` link attached in the same flight, closed without waiting out the keep-alive, a
  session given back a moment ago accepted again (pinned: ``POLLING_OPENS``);
- ``sdk_management.py``, management-only handlers: sessions listed on a handler kept open, messages
  deleted on the server without receiving them (``batch-delete-messages``);
- ``sdk_messages.py``, messages and batches: a message added to a batch with one encoding, a
  ``ServiceBusMessage`` made without its property setters (pinned: ``BATCH_ADD_SOURCE``,
  ``BATCH_ENCODE_SOURCE``, ``TRACE_SOURCE``, ``WRAP_SOURCE``);
- ``sdk_spares.py``, AMQP connections opened ahead of need, their session begun and CBS links
  attached, lent to the next link (pinned: ``SPARE_OPEN_TAIL``).

Each part lists the private names it uses in its own ``PRIVATE_NAMES``; ``PRIVATE_NAMES`` here is
all of them. ``tests/core/test_boundary.py`` fails when an installed SDK renames any of them, when a
part lists a name it no longer uses or uses a private one it does not list, and when any other
module of the kit uses one: an upgrade breaks one test instead of silently slowing every settlement.
The range of SDK versions this is tested with is pinned in ``pyproject.toml``.
"""

from __future__ import annotations

from . import sdk_management, sdk_messages, sdk_open, sdk_receiver, sdk_spares

PARTS = (sdk_receiver, sdk_open, sdk_management, sdk_messages, sdk_spares)
# (owner, attribute) pairs, the owner a dotted path inside the SDK: every part's list, once each.
PRIVATE_NAMES: tuple[tuple[str, str], ...] = tuple(
    dict.fromkeys(
        (owner, name) for part in PARTS for owner, names in part.PRIVATE_NAMES.items() for name in names.split()
    )
)
