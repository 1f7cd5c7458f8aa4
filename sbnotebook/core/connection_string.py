"""The one connection-string grammar: ``Key=Value`` segments separated by ``;``, a key read without
its case or the spaces around it (``Endpoint=``, `` endpoint =``), a value up to its segment's end
(a key's base64 ends in ``=``), empty segments skipped.

Every reader of a connection string in the kit reads it here: the connection (``connections/``),
the SDK seam (``sdk/``: the emulator's administration client, WebSockets), the pytest plugin's live
mode. The emulator imports nothing from the kit, so its journey client keeps a copy of
:func:`fields`; tests/core/test_connection_string.py holds the two equal on every form.
Errors name the problem, never the key.
"""

from __future__ import annotations

import urllib.parse

from .errors import ConfigurationError

EXPECTED = "'Endpoint=sb://...;SharedAccessKeyName=...;SharedAccessKey=...'"
# The keys as the SDK's own parser reads them: its key names without spaces around them, its values
# as given (``UseDevelopmentEmulator`` only as ``true``). :func:`canonical` writes them so.
KEYS = {
    k.lower(): k
    for k in (
        "Endpoint",
        "SharedAccessKeyName",
        "SharedAccessKey",
        "SharedAccessSignature",
        "EntityPath",
        "UseDevelopmentEmulator",
        "TransportType",
    )
}


def fields(text: str) -> dict[str, str]:
    """Each segment's key, lower-cased, with its value, stripped. Nothing is required here
    (:func:`parse_connection_string` checks what a connection needs)."""
    if not isinstance(text, str) or "=" not in text:
        raise ConfigurationError(f"That is not a Service Bus connection string (expected {EXPECTED}).")
    found: dict[str, str] = {}
    for n, part in enumerate(text.strip().split(";"), start=1):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:  # the segment itself is not shown: it may be a key that lost its "="
            raise ConfigurationError(f"Segment {n} of the connection string is not Key=Value (expected {EXPECTED}).")
        found[key.strip().lower()] = value.strip()
    return found


def canonical(text: str) -> str:
    """The same connection string as the SDK reads it: its parser takes a key only without spaces
    around it, a value as given (a space kept), ``UseDevelopmentEmulator`` only as ``true``, and
    refuses a leading ``;``. What the kit accepts, the SDK is handed so, its keys in one order."""
    found = fields(text)
    if "usedevelopmentemulator" in found:
        found["usedevelopmentemulator"] = found["usedevelopmentemulator"].lower()
    order = {key: n for n, key in enumerate(KEYS)}  # one order, so one string however it was written
    ranked = sorted(found.items(), key=lambda item: order.get(item[0], len(order)))
    return ";".join(f"{KEYS.get(key, key)}={value}" for key, value in ranked)


def parse_connection_string(text: str) -> dict[str, str]:
    """:func:`fields`, checked as a connection needs them: an endpoint with a host name, and a
    key (its name and value) or a shared access signature."""
    found = fields(text)
    if "endpoint" not in found:
        raise ConfigurationError("The connection string has no Endpoint=sb://<namespace>.")
    if not urllib.parse.urlsplit(found["endpoint"]).hostname:
        raise ConfigurationError(f"The Endpoint {found['endpoint']!r} has no host name.")
    has_key = "sharedaccesskeyname" in found and "sharedaccesskey" in found
    if not has_key and "sharedaccesssignature" not in found:
        raise ConfigurationError(
            "The connection string needs SharedAccessKeyName and SharedAccessKey (or a SharedAccessSignature)."
        )
    return found


def endpoint_netloc(text: str) -> str:
    """The endpoint's ``host[:port]``."""
    netloc = urllib.parse.urlsplit(fields(text).get("endpoint", "")).netloc
    if not netloc:
        raise ConfigurationError("The connection string has no Endpoint=sb://<namespace>.")
    return netloc


def names_the_emulator(text: str) -> bool:
    """Whether it says ``UseDevelopmentEmulator=true`` (any case)."""
    return fields(text).get("usedevelopmentemulator", "").lower() == "true"
