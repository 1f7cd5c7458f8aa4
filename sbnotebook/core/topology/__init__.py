"""What only reads a namespace: its entities, a topic's rules, where a message would be routed.
Nothing here moves or settles a message.

- ``route.py``: ``core.route``, which subscriptions of a topic messages go to, and why not;
- ``rules.py``: a topic's rules, read from the administration API, a Config.json, or typed;
  ``listing.py``: a namespace's entities read through the administration API (``core.export_topology``);
- ``answer.py``: what ``core.route`` answers (``RouteResult``); ``config_json.py``: a topology
  written as Microsoft's emulator reads it (its ``Config.json``);
- ``evaluator.py``: a topic's rules evaluated on records with the broker's own evaluator
  (``sbnotebook.sqlrules``).
"""
