"""The administration API (ATOM over HTTP): ``api.py`` the requests, ``atom.py`` the documents;
``clockroute.py`` the emulator's own ``/$emulator/clock`` (its time; a manual clock advanced)."""
