"""Who may do what: ``sas.py`` Shared Access Signature tokens, ``entra.py`` Entra ID tokens for declared
principals, ``tls.py`` the local certificate authority and the server's TLS context."""
