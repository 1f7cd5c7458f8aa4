"""Which certificate authorities the kit trusts for TLS (AMQP, WebSockets, the admin API).

In order: ``SBNOTEBOOK_CA_BUNDLE`` (the kit's own setting), ``SSL_CERT_FILE`` (what Python and
OpenSSL honour), ``REQUESTS_CA_BUNDLE`` (what requests and the Azure CLI honour), else certifi's
bundle, which the SDK uses by default. Behind a TLS-inspecting proxy the corporate CA is in one of
these; forcing certifi's bundle would make every connection fail.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping
from pathlib import Path

from .errors import ConfigurationError

CA_BUNDLE_SETTINGS = ("SBNOTEBOOK_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")


def ca_bundle(env: Mapping[str, str] | None = None) -> str | None:
    """The CA file a setting names, or None (certifi's, the SDK's default). A setting naming a
    file that does not exist is an error, not a silent fallback."""
    env = os.environ if env is None else env
    for name in CA_BUNDLE_SETTINGS:
        value = env.get(name)
        if value:
            if not Path(value).is_file():
                raise ConfigurationError(f"{name} names {value!r}, which is not a file of CA certificates.")
            return value
    return None


def tls_context() -> ssl.SSLContext:
    """The TLS context for every connection of the process (verifies certificate and host name)."""
    return _context(ca_bundle())


@functools.cache
def _context(cafile: str | None) -> ssl.SSLContext:
    if cafile is None:
        import certifi  # the SDK's own dependency and default

        cafile = certifi.where()
    return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
