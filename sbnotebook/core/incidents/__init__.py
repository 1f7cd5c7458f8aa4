"""The incident tools: operations over a whole entity that must never lose a message.

- ``purge.py`` (and ``purge_on_server.py``, the server-side batch delete), ``leftovers.py`` (what is
  still there after a take-everything operation, and why).
- ``resubmit.py`` (move messages, copy first then complete) with ``resubmit_batches.py`` (its workers,
  each batch moved whole), ``resubmit_record.py`` (what a run that did not finish leaves for the next),
  ``selection.py`` (what its ``where`` selects), ``copies.py`` (one copy of one message),
  ``copying.py`` with ``copy_progress.py`` (copy an entity, to another namespace too, resumably).
- ``exporting.py``, ``importing.py`` and ``jsonl.py`` (the JSON lines file), ``resumable.py`` (the state
  file that lets an interrupted send go on), ``tail.py`` (a live tail, by peeking).
"""
