"""What ``--data-dir`` keeps across restarts: ``journal.py`` (written as the broker changes),
``snapshot.py`` (every live message, compactly), ``rows.py`` (messages and definitions as rows),
``recording.py`` (entity changes), ``durability.py`` (a broker brought back at start-up)."""
