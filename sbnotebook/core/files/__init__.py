"""The kit's files: messages as JSON lines, and the state that lets an interrupted run go on.

- ``exporting.py`` (``core.export_jsonl``) and ``importing.py`` (``core.import_jsonl``: a send
  that never doubles a message on a resumed run);
- ``jsonl.py``: the JSON lines file, one record a line, each value with its AMQP type;
- ``resumable.py``: the state file a resumed send, copy or resubmit reads.
"""
