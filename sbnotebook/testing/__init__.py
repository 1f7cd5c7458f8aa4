"""What the pytest plugin ``servicebus`` (``sbnotebook/pytest_plugin.py``) does once a test asks
for a namespace: loaded by its fixtures only, never when the plugin itself loads.

Where to change what:

- ``namespace.py``: a fresh namespace per test (an emulator of its own, or live entities), and
  what the whole session shares; ``model.py``: ``Namespace``, what a test gets;
- ``topology.py``: the ``servicebus_topology`` marker as a topology; ``clock.py``: the
  ``servicebus_clock`` marker;
- ``spans.py``: the ``servicebus_spans`` fixture's spans (one in-memory exporter on the global
  tracer provider, per session);
- ``live.py``: ``--servicebus-live``, the same tests on a real namespace (uniquely named entities,
  created and deleted through the administration API).
"""

from .model import Namespace

__all__ = ["Namespace"]
