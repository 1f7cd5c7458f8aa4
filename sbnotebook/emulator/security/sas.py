"""Shared Access Signature tokens, validated the way Service Bus validates them.

A token names its key (``skn``) and the resource it is for (``sr``). The key is one of a shared
access policy's two keys: a policy of the namespace (the emulator's ``RootManageSharedAccessKey``,
or one declared in the topology file) or of the queue or topic the token's resource lies in
(Service Bus's entity-level policies). A token gets the policy's rights (Send, Listen, Manage;
Manage includes the other two), and only for resources under its ``sr``: an entity's key signs
nothing outside that entity, the namespace included.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
"""The name of the emulator's shared access key (``Emulator(key_name=)``), as on Azure."""
DEFAULT_KEY = "SAS_KEY_VALUE"
"""The published key of Microsoft's Service Bus emulator: an emulator on loopback given no key uses
it; on an address other machines reach it is refused, and no key given means a random one."""
# Service Bus's claims (rights). The emulator's one key is a RootManageSharedAccessKey: all three.
SEND, LISTEN, MANAGE = "Send", "Listen", "Manage"
ALL_RIGHTS = frozenset({SEND, LISTEN, MANAGE})


RIGHTS = (MANAGE, SEND, LISTEN)  # as Service Bus spells them
KEY_LENGTH = 44  # a key as Service Bus and the SDKs make one: 32 random bytes, base64-encoded


def new_key() -> str:
    """A key as Azure makes one (32 random bytes in base64, 44 characters)."""
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def is_service_bus_key(key: str) -> bool:
    """A 44-character base64 text (what Service Bus takes for a rule's key through its API)."""
    if len(key) != KEY_LENGTH or not key.isascii():
        return False
    try:
        base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


class TokenError(Exception):
    """Why a token was refused (never includes the key)."""


def rights_of(names: Iterable[str], where: str = "Rights") -> frozenset[str]:
    """Rights by name (case-insensitive), Manage bringing Send and Listen as in Service Bus."""
    out = set()
    for name in names:
        match = next((r for r in RIGHTS if str(name).lower() == r.lower()), None)
        if match is None:
            raise ValueError(f"{where}: unknown right {name!r} (Service Bus has {', '.join(RIGHTS)})")
        out.add(match)
    if not out:
        raise ValueError(f"{where}: a policy needs at least one right ({', '.join(RIGHTS)})")
    return ALL_RIGHTS if MANAGE in out else frozenset(out)


@dataclass(frozen=True)
class Policy:
    """A shared access policy: a name, two keys, rights; of the namespace (``entity`` None) or of
    one queue or topic (``entity``, as written). Its keys never appear in a repr."""

    name: str
    primary_key: str = field(repr=False)
    secondary_key: str = field(repr=False)
    rights: frozenset[str] = ALL_RIGHTS
    entity: str | None = None
    # As the administration API reports them: the rights in the order given, and when the rule was
    # made and last changed (None: when the emulator started)
    listed: tuple[str, ...] = field(default=(), compare=False, repr=False)
    created_at: datetime | None = field(default=None, compare=False, repr=False)
    modified_at: datetime | None = field(default=None, compare=False, repr=False)

    @property
    def rights_listed(self) -> tuple[str, ...]:
        return self.listed or tuple(r for r in RIGHTS if r in self.rights)

    def signs(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this message's HMAC under the primary or the secondary key."""
        found = False
        for key in (self.primary_key, self.secondary_key):
            expected = base64.b64encode(hmac.new(key.encode(), message, hashlib.sha256).digest())
            found |= hmac.compare_digest(expected, signature)  # both compared: no timing on which
        return found


class EntityPolicies(Protocol):
    """Where the policies of queues and topics live (the broker: each entity holds its own, so they
    go with it when it is deleted and are journaled with it)."""

    def policies_of(self, entity: str) -> Sequence[Policy]: ...

    def entity_policies(self) -> list[Policy]: ...


class KeyRing:
    """The policies whose keys sign tokens: the namespace's and each queue's or topic's. An entity's
    come from ``entities`` when given (the broker), else from this ring."""

    def __init__(self, policies: Iterable[Policy] = (), entities: EntityPolicies | None = None) -> None:
        self._policies: dict[tuple[str | None, str], Policy] = {}
        self._entities = entities
        for policy in policies:
            self.add(policy)

    @classmethod
    def of(cls, keys: KeyRing | dict[str, str]) -> KeyRing:
        """A ring as given, or one of namespace keys with every right (``{name: key}``)."""
        if isinstance(keys, KeyRing):
            return keys
        return cls(Policy(name, key, key) for name, key in keys.items())

    def add(self, policy: Policy) -> None:
        if policy.entity is not None and self._entities is not None:
            raise ValueError("an entity's policies are kept by the entity (Broker.set_policies)")
        entity = policy.entity.lower() if policy.entity is not None else None
        self._policies[(entity, policy.name)] = policy

    def get(self, name: str, entity: str | None = None) -> Policy | None:
        if entity is None or self._entities is None:
            return self._policies.get((entity.lower() if entity is not None else None, name))
        return next((p for p in self._entities.policies_of(entity) if p.name == name), None)

    def policies(self) -> list[Policy]:
        held = list(self._policies.values())
        return held + (self._entities.entity_policies() if self._entities is not None else [])

    def candidates(self, key_name: str, path: str) -> list[Policy]:
        """Policies named ``key_name`` that may sign a token for ``path`` (``q``, ``t/subscriptions/s``,
        or empty for the namespace): the namespace's, and the entity's the path lies in."""
        first = next((p for p in path.lower().split("/") if p), None)
        found = [self._policies.get((None, key_name))]
        if first is not None:
            found.append(self.get(key_name, first))
        return [p for p in found if p is not None]

    def __repr__(self) -> str:
        return f"<KeyRing of {len(self._policies)} policies>"  # never a key


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


def validate(token: str, *, keys: KeyRing | dict[str, str], resource: str, now: float | None = None) -> Grant:
    """Check key name, signature, expiry and audience; return what the token grants (its policy's
    rights, for the resources under its audience)."""
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
    try:
        expiry = float(fields["se"])
    except ValueError:
        raise TokenError("token expiry is not a number") from None
    audience = _normalise(urllib.parse.unquote_plus(fields["sr"]))
    _, _, audience_path = audience.partition("/")
    policies = KeyRing.of(keys).candidates(fields["skn"], audience_path)
    if not policies:
        # An entity's key is known only for resources in that entity (not for the namespace)
        raise TokenError(
            f"unknown key name {fields['skn']!r}: no policy of the namespace or of the entity the token is for"
        )
    message = f"{fields['sr']}\n{fields['se']}".encode()
    given = urllib.parse.unquote(fields["sig"]).encode()
    policy = next((p for p in policies if p.signs(message, given)), None)
    if policy is None:
        raise TokenError("the token signature does not match the key")
    if expiry <= now:
        raise TokenError("the token has expired")
    wanted = _normalise(resource)
    if wanted != audience and not wanted.startswith(audience + "/"):  # by segments: q does not cover q2
        raise TokenError("the token's audience does not cover the requested resource")
    return Grant(audience, expiry, policy.rights)


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
