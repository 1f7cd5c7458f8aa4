"""Connections: where Service Bus is and one live connection to it.

- ``connection.py``: the settings, resolved in a fixed order (argument, environment, emulator);
  ``credentials.py``: credential and secret references (the CAs TLS trusts: ``core/trust.py``).
- ``live.py``: a live connection (one SDK client, one event-loop thread, links kept open);
  ``registry.py``: the process's live connections, found by ``connect()``;
  ``pools.py`` and ``links.py``: the SDK senders and receivers operations borrow.
- ``loop.py``: the event-loop thread; ``interrupts.py``: an interrupt a bulk operation answers with
  its Report, between two steps; ``syncforms.py``: the sync form of an async operation.
"""
