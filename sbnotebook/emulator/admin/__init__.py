"""The administration API (ATOM over HTTP): ``api.py`` the requests; ``entities.py`` creating and
updating entities from ``properties.py`` (what a description sets), ``limits.py`` (what Service Bus
refuses) and ``authrules.py`` (shared access rules); ``documents.py`` and ``rulexml.py`` the entities'
and rules' XML; ``atom.py`` the ATOM envelopes; ``clockroute.py`` the emulator's own
``/$emulator/clock`` (its time; a manual clock advanced)."""
