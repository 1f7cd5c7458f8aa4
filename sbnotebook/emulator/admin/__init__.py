"""The administration API (ATOM over HTTP): ``api.py`` the requests, ``atom.py`` the documents."""
