"""The SQL of subscription rules (``broker/rules.py`` applies them): ``sqlfilter.py`` the filter
language, ``sqlaction.py`` the actions (``SET``, ``REMOVE``). Pure functions of an expression and
a message's properties: it imports nothing else of the emulator."""
