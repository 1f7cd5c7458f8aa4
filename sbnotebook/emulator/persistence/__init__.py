"""What ``--data-dir`` keeps across restarts: ``journal.py`` (written as the broker changes),
``snapshot.py`` (every live message, compactly), ``rows.py`` (messages and definitions as rows),
``recording.py`` (entity changes), ``durability.py`` (a broker brought back at start-up). The journal
is the broker's ``Recorder`` (``broker/recorder.py``): the broker reports to it and never imports it."""
