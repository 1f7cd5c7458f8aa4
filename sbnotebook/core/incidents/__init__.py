"""The incident tools: operations over a whole entity that must never lose a message.

- ``purge.py`` (and ``purge_window.py``, a purge of a time window and the removals by sequence number
  every purge shares; ``purge_on_server.py``, the server-side batch delete), ``leftovers.py`` (what is
  still there after a take-everything operation, and why).
- ``resubmit.py`` (move messages, copy first then complete: ``operations/copies.py``; its arguments
  checked, its record named, its canary's fate read) with ``resubmit_run.py`` (one run, a discard's
  and a purge window's too: its workers started and ended, the brake beside them, what is left, its
  Report), ``resubmit_batches.py`` (its workers, each batch moved whole), ``resubmit_record.py`` (what
  a run that did not finish leaves for the next), ``selection.py`` (what its ``where`` selects),
  ``discarding.py`` (a resubmit without the copy: the selected messages removed for good).
- ``copy_many.py`` (the entities a glob matches, each copied) with ``copy_many_stops.py`` (its brake
  and canary across the entities), ``copying.py`` (copy an entity, to
  another namespace too, resumably: its arguments, its record named) with ``copy_start.py`` (the
  progress a run resumes), ``copy_run.py`` (one run: peek, copy, send, the brake beside it, its
  Report), ``copy_peeks.py`` (its source read ahead by peeking, bounded in bytes) and
  ``copy_progress.py`` (its record on disk).
- ``brake.py`` (what stops a resubmit or a copy on its own: the target's dead letters and backlog,
  watched), ``canary.py`` (K moved first, their fate read at the target).
- ``exporting.py``, ``importing.py`` and ``jsonl.py`` (the JSON lines file), ``resumable.py`` (the state
  file that lets an interrupted send go on), ``tail.py`` (a live tail, by peeking).
- ``topology.py`` (a namespace's entities read through the administration API) written by
  ``config_json.py`` as Microsoft's emulator reads them (its ``Config.json``).
- ``route.py`` (which subscriptions of a topic messages go to, and why not: ``core.route``) with
  ``topic_rules.py`` (a topic's rules read from the administration API, a Config.json, or typed).
"""
