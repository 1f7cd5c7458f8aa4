"""A purge: every message of an entity (or of a time window) removed, each removal counted from the
broker's answer.

- ``api.py``: ``core.purge`` and ``core.apurge``, their arguments checked, the way chosen;
- ``window.py``: a purge of a time window (a discard of what the window selects, by a resubmit's run),
  and the removals by sequence number every purge shares;
- ``on_server.py``: the server-side batch delete.
"""
