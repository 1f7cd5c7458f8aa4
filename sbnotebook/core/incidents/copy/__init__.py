"""A copy: an entity's messages copied, to another namespace too, resumably; the originals stay.

- ``many.py``: ``core.copy_many``, the entities a glob matches, each copied, with ``many_stops.py``
  (its brake and canary across the entities);
- ``api.py``: ``core.copy`` and ``core.acopy`` (one entity: its arguments, its record named);
- ``run.py``: one run (peek, copy, send, the brake beside it, its Report);
- ``start.py``: the progress a run resumes; ``read_ahead.py``: its source read ahead by peeking,
  bounded in bytes;
- ``progress.py``: its record on disk.
"""
