"""The incident tools: operations that move or remove the messages of a whole entity, and must
never lose or double one.

- ``playbook/``: an incident procedure written once (YAML) and run as a job: a plan from one scan,
  each rule through resubmit or discard, an audit of every message (docs/playbooks.md);
- ``purge/``: take everything (or a time window) out of an entity, by batch delete on the server or
  by receiving;
- ``resubmit/``: move messages, copy first then complete (``operations/copies.py``), and discard
  (a resubmit without the copy);
- ``copy/``: copy an entity, or the entities a glob matches, to another namespace too, resumably;
- ``edits.py``: what a resubmit changes in each message it moves (a body patch, properties, ...);
- ``stops.py``: the brake and the canary as the functions above take them (one value each, the
  old keywords gathered);
- at the bottom, for all of them: ``brake.py`` (what stops a resubmit or a copy on its own: the
  target's dead letters and backlog, watched), ``canary.py`` (K moved first, their fate read at the
  target), ``leftovers.py`` (what is still there after a take-everything operation, and why).

The files they read and write (JSON lines, the state a resumed run reads) are in ``core/files/``;
what only reads a namespace (its topology, a topic's rules, routing) in ``core/topology/``.
"""
