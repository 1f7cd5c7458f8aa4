"""Shared Access Signature tokens, validated the way Service Bus validates them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse
from dataclasses import dataclass

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"  # as in Microsoft's Service Bus emulator
# Service Bus's claims (rights). The emulator's one key is a RootManageSharedAccessKey: all three.
SEND, LISTEN, MANAGE = "Send", "Listen", "Manage"
ALL_RIGHTS = frozenset({SEND, LISTEN, MANAGE})


class TokenError(Exception):
    """Why a token was refused (never includes the key)."""


@dataclass(frozen=True)
class Grant:
    audience: str  # lower-cased resource prefix the token covers
    expires: float
    rights: frozenset[str] = ALL_RIGHTS  # a SAS key's rights; an Entra principal's roles' rights


def sign(audience: str, key_name: str, key: str, expiry: float) -> str:
    """A token as the SDK builds it (used by tests and the admin client's transport)."""
    encoded = urllib.parse.quote_plus(audience)
    se = str(int(expiry))
    sig = base64.b64encode(hmac.new(key.encode(), f"{encoded}\n{se}".encode(), hashlib.sha256).digest())
    return f"SharedAccessSignature sr={encoded}&sig={urllib.parse.quote_plus(sig.decode())}&se={se}&skn={key_name}"


def validate(token: str, *, keys: dict[str, str], resource: str, now: float | None = None) -> Grant:
    """Check key name, signature, expiry and audience; return what the token grants."""
    now = time.time() if now is None else now
    if not token.startswith("SharedAccessSignature "):
        raise TokenError("not a SharedAccessSignature token")
    fields: dict[str, str] = {}
    for part in token[len("SharedAccessSignature ") :].split("&"):
        name, sep, value = part.partition("=")
        if not sep:
            raise TokenError("malformed token")
        fields[name.strip()] = value
    missing = {"sr", "sig", "se", "skn"} - fields.keys()
    if missing:
        raise TokenError(f"token lacks {', '.join(sorted(missing))}")
    key = keys.get(fields["skn"])
    if key is None:
        raise TokenError(f"unknown key name {fields['skn']!r}")
    try:
        expiry = float(fields["se"])
    except ValueError:
        raise TokenError("token expiry is not a number") from None
    expected = base64.b64encode(
        hmac.new(key.encode(), f"{fields['sr']}\n{fields['se']}".encode(), hashlib.sha256).digest()
    )
    given = urllib.parse.unquote(fields["sig"]).encode()
    if not hmac.compare_digest(expected, given):
        raise TokenError("the token signature does not match the key")
    if expiry <= now:
        raise TokenError("the token has expired")
    audience = _normalise(urllib.parse.unquote_plus(fields["sr"]))
    if not _normalise(resource).startswith(audience):
        raise TokenError("the token's audience does not cover the requested resource")
    return Grant(audience, expiry)


def resource_key(uri: str) -> str:
    """A resource as grants hold it: ``sb://Host:5671/Orders/`` -> ``host:5671/orders``."""
    return _normalise(uri)


def _normalise(uri: str) -> str:
    """Compare resources without scheme, query, case or trailing slash (the JS admin client signs
    the whole request URL, ``https://ns/q?api-version=2021-05``, lower-cased)."""
    lowered = uri.lower().partition("?")[0].partition("#")[0]
    for scheme in ("sb://", "amqps://", "amqp://", "https://", "http://"):
        if lowered.startswith(scheme):
            lowered = lowered[len(scheme) :]
            break
    return lowered.rstrip("/")


def covers(grant: Grant, entity_path: str, now: float, right: str | None = None) -> bool:
    """Does a grant cover an entity path (``q``, ``t/subscriptions/s/$management``), with ``right``
    if one is named?

    Compared by path segments, ignoring the host: a namespace-wide token covers all.
    """
    if grant.expires <= now or (right is not None and right not in grant.rights):
        return False
    _, _, granted = grant.audience.partition("/")
    want = [p for p in entity_path.lower().split("/") if p]
    prefix = [p for p in granted.split("/") if p]
    return want[: len(prefix)] == prefix
