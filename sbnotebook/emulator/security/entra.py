"""Entra ID for the emulator (with ``--tls``): a token issuer for declared service principals, and
the checks Service Bus makes on the tokens it is given.

What azure-identity's ``ClientSecretCredential(tenant, client, secret, authority=...,
disable_instance_discovery=True)`` asks an authority for (read from msal 1.3x):

- ``GET /{tenant}/v2.0/.well-known/openid-configuration`` (tenant discovery; it needs
  ``authorization_endpoint`` and ``token_endpoint``);
- ``POST {token_endpoint}`` with ``grant_type=client_credentials``, ``client_id``,
  ``client_secret`` and ``scope`` (the SDK asks for ``https://servicebus.azure.net//.default``,
  with a double slash).

Tokens are RS256 JWTs signed with a key made for the run (published at ``jwks_uri``). As on Azure,
a token says who the caller is (``oid``, ``appid``), not what it may do: the broker looks the
principal's roles up when it authorizes (Azure RBAC is evaluated by the service, not carried in the
token). Role assignments here are namespace-wide.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .sas import ALL_RIGHTS, LISTEN, SEND

# Azure's built-in data roles for Service Bus and the claims (rights) each gives.
OWNER = "Azure Service Bus Data Owner"
SENDER = "Azure Service Bus Data Sender"
RECEIVER = "Azure Service Bus Data Receiver"
ROLE_RIGHTS: dict[str, frozenset[str]] = {OWNER: ALL_RIGHTS, SENDER: frozenset({SEND}), RECEIVER: frozenset({LISTEN})}
_ROLE_NAMES = {name.lower(): name for name in ROLE_RIGHTS} | {"owner": OWNER, "sender": SENDER, "receiver": RECEIVER}

# What Service Bus accepts as a token's audience, and the scopes the SDKs ask for (the Python SDK's
# JWT_TOKEN_SCOPE has a double slash; Entra reads the resource as everything before '/.default').
AUDIENCE = "https://servicebus.azure.net"
AUDIENCES = frozenset({AUDIENCE, AUDIENCE + "/"})
SCOPES = frozenset({AUDIENCE + "/.default", AUDIENCE + "//.default"})
TOKEN_LIFETIME = 3600  # seconds, about what Entra gives an application token
MAX_FORM = 16 * 1024  # a token request is a few hundred bytes


class EntraError(Exception):
    """Why a token was refused (never includes a secret or the token)."""


def role_name(text: str) -> str:
    """A built-in role by its full or short name (Owner, Sender, Receiver), case-insensitive."""
    name = _ROLE_NAMES.get(text.strip().lower())
    if name is None:
        raise ValueError(
            f"unknown role {text.strip()!r}: use Azure Service Bus Data Owner, Sender or Receiver "
            "(or Owner/Sender/Receiver)"
        )
    return name


@dataclass(frozen=True)
class Principal:
    """A service principal: an application (client id) with a secret and role assignments."""

    client_id: str
    secret: str = field(repr=False)
    roles: tuple[str, ...]
    object_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def rights(self) -> frozenset[str]:
        return frozenset().union(*(ROLE_RIGHTS[r] for r in self.roles)) if self.roles else frozenset()

    @classmethod
    def parse(cls, spec: str) -> Principal:
        """``CLIENT_ID:SECRET:ROLE[,ROLE...]`` (the command line's ``--principal``). A SECRET of
        ``env:NAME`` is read from that environment variable, so that it is not in the command line
        (which other users of the machine see in ``ps``)."""
        client_id, sep1, rest = spec.partition(":")
        secret, sep2, roles = rest.rpartition(":")
        if not (sep1 and sep2 and client_id and secret and roles):
            raise ValueError("--principal expects CLIENT_ID:SECRET:ROLE[,ROLE...] (SECRET may be env:NAME)")
        if secret.startswith("env:"):
            name = secret.removeprefix("env:")
            value = os.environ.get(name, "")
            if not value:
                raise ValueError(f"--principal {client_id}: the environment variable {name!r} is not set or empty")
            secret = value
        return cls(client_id, secret, tuple(role_name(r) for r in roles.split(",") if r.strip()))

    @classmethod
    def from_config(cls, item: dict[str, Any], where: str) -> Principal:
        """``{"ClientId": ..., "ClientSecret": ..., "Roles": [...]}`` in the topology file."""
        try:
            client_id, secret, roles = item["ClientId"], item["ClientSecret"], item["Roles"]
        except (KeyError, TypeError):
            raise ValueError(f"{where}: a principal needs ClientId, ClientSecret and Roles") from None
        if isinstance(roles, str):
            roles = roles.split(",")
        return cls(str(client_id), str(secret), tuple(role_name(str(r)) for r in roles))


@dataclass(frozen=True)
class Identity:
    """Who a valid token names, and until when."""

    principal: Principal
    expires: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Issuer:
    """The tenant's token issuer: principals, a signing key, the three endpoints, validation."""

    def __init__(self, tenant: str | None = None, principals: list[Principal] | None = None) -> None:
        self.tenant = tenant or str(uuid.uuid4())
        self._rsa: Any = None  # made on first use: every TLS emulator has an issuer, few sign anything
        self._rsa_lock = threading.Lock()
        self.kid = secrets.token_hex(8)
        self._principals: dict[str, Principal] = {}
        for p in principals or ():
            self.add(p)

    @property
    def _key(self) -> Any:
        """The run's RSA signing key (2048 bits, about 50 ms to make)."""
        with self._rsa_lock:
            if self._rsa is None:
                from cryptography.hazmat.primitives.asymmetric import rsa

                self._rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            return self._rsa

    def __repr__(self) -> str:
        return f"<Issuer tenant={self.tenant} principals={len(self._principals)}>"  # never a secret

    def add(self, principal: Principal) -> Principal:
        self._principals[principal.client_id] = principal
        return principal

    def by_object_id(self, object_id: str) -> Principal | None:
        return next((p for p in self._principals.values() if p.object_id == object_id), None)

    # ----------------------------------------------------------------- tokens

    def token(self, principal: Principal, authority: str, *, lifetime: float = TOKEN_LIFETIME) -> tuple[str, int]:
        """A signed access token for Service Bus and its expiry (epoch seconds)."""
        now = int(time.time())
        expires = int(now + lifetime)
        claims = {
            "aud": AUDIENCE,
            "iss": f"{authority.rstrip('/')}/{self.tenant}/v2.0",
            "iat": now,
            "nbf": min(now, expires),
            "exp": expires,
            "appid": principal.client_id,
            "azp": principal.client_id,
            "oid": principal.object_id,
            "sub": principal.object_id,
            "tid": self.tenant,
            "idtyp": "app",
            "ver": "2.0",
        }
        return self._sign(claims), expires

    def _sign(self, claims: dict[str, Any]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def validate(self, token: str, now: float | None = None) -> Identity:
        """Signature, audience, tenant, expiry and a known principal, as Service Bus checks them."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        now = time.time() if now is None else now
        parts = token.strip().split(".")
        if len(parts) != 3:
            raise EntraError("not a JSON Web Token")
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except ValueError:
            raise EntraError("the token is malformed") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise EntraError("the token is malformed")
        if header.get("alg") != "RS256" or header.get("kid") != self.kid:
            raise EntraError("the token is not signed by this tenant's issuer")
        try:
            self._key.public_key().verify(
                signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            raise EntraError("the token signature is invalid") from None
        if claims.get("aud") not in AUDIENCES:
            raise EntraError(f"the token's audience is not {AUDIENCE}")
        if claims.get("tid") != self.tenant or not str(claims.get("iss", "")).endswith(f"/{self.tenant}/v2.0"):
            raise EntraError("the token was issued for another tenant")
        exp, nbf = claims.get("exp"), claims.get("nbf", 0)
        if not isinstance(exp, (int, float)) or not isinstance(nbf, (int, float)):
            raise EntraError("the token has no valid expiry")
        if exp <= now:
            raise EntraError("the token has expired")
        if nbf > now:
            raise EntraError("the token is not valid yet")
        principal = self.by_object_id(str(claims.get("oid", "")))
        if principal is None:
            raise EntraError("the token names no principal of this tenant")
        return Identity(principal, float(exp))

    # ------------------------------------------------------------------- HTTP

    def handles(self, parts: list[str]) -> bool:
        """Is this request path one of the authority's (``/{tenant}/...``)?"""
        return [p.lower() for p in parts[1:]] in (
            ["v2.0", ".well-known", "openid-configuration"],
            ["oauth2", "v2.0", "token"],
            ["discovery", "v2.0", "keys"],
        )

    def serve(self, method: str, parts: list[str], form: bytes, authority: str) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) for one request to the authority's endpoints."""
        if parts[0].lower() != self.tenant:
            return 400, _aad_error(
                "invalid_request", 90002, f"Tenant '{parts[0]}' not found: use the emulator's tenant id."
            )
        tail = [p.lower() for p in parts[1:]]
        if tail[0] == "v2.0" and method == "GET":
            return 200, self.openid_configuration(authority)
        if tail[0] == "discovery" and method == "GET":
            return 200, self.jwks()
        if tail[0] == "oauth2" and method == "POST":
            return self._token_request(form, authority)
        return 405, _aad_error("invalid_request", 900561, f"The endpoint does not accept {method}.")

    def openid_configuration(self, authority: str) -> dict[str, Any]:
        base = f"{authority.rstrip('/')}/{self.tenant}"
        return {
            "issuer": f"{base}/v2.0",
            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",  # required by msal, never served
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "jwks_uri": f"{base}/discovery/v2.0/keys",
            "response_types_supported": ["code", "token"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "grant_types_supported": ["client_credentials"],
            "tenant_region_scope": "WW",
        }

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()

        def uint(n: int) -> str:
            return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))

        key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid}
        return {"keys": [key | {"n": uint(numbers.n), "e": uint(numbers.e)}]}

    def _token_request(self, form: bytes, authority: str) -> tuple[int, dict[str, Any]]:
        import urllib.parse

        fields = {k: v[0] for k, v in urllib.parse.parse_qs(form.decode("utf-8", "replace")).items()}
        if fields.get("grant_type") != "client_credentials":
            return 400, _aad_error(
                "unsupported_grant_type", 70003, "The emulator's authority supports the client credentials grant only."
            )
        principal = self._principals.get(fields.get("client_id", ""))
        if principal is None:
            return 400, _aad_error(
                "unauthorized_client",
                700016,
                f"Application with identifier '{fields.get('client_id', '')}' was not found in the directory "
                f"'{self.tenant}'.",
            )
        given = fields.get("client_secret", "")
        if not hmac.compare_digest(given.encode(), principal.secret.encode()):
            return 401, _aad_error(
                "invalid_client", 7000215, "Invalid client secret provided: give the secret of --principal."
            )
        scopes = set(fields.get("scope", "").split())
        if not scopes or not scopes <= SCOPES:
            return 400, _aad_error(
                "invalid_scope",
                500011,
                f"The emulator issues tokens for Service Bus only (scope {AUDIENCE}/.default), not {sorted(scopes)}.",
            )
        token, expires = self.token(principal, authority)
        lifetime = max(0, expires - int(time.time()))
        return 200, {"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime, "access_token": token}


def _aad_error(error: str, code: int, description: str) -> dict[str, Any]:
    """Entra's error body: ``error``, ``error_description`` starting AADSTSnnnn, ``error_codes``."""
    return {
        "error": error,
        "error_description": f"AADSTS{code}: {description}",
        "error_codes": [code],
        "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
        "trace_id": str(uuid.uuid4()),
        "correlation_id": str(uuid.uuid4()),
    }


class EmulatorCredential:
    """An azure-core ``TokenCredential`` for one principal of the emulator's tenant, for tests:
    ``get_token`` signs a token directly (no HTTP), as Entra would issue it for that principal."""

    def __init__(self, issuer: Issuer, principal: Principal, authority: str, lifetime: float) -> None:
        self._issuer = issuer
        self.principal = principal
        self._authority = authority
        self._lifetime = lifetime

    def __repr__(self) -> str:
        return f"<EmulatorCredential client_id={self.principal.client_id} roles={list(self.principal.roles)}>"

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken
        from azure.core.exceptions import ClientAuthenticationError

        if not scopes or not set(scopes) <= SCOPES:
            raise ClientAuthenticationError(f"the emulator issues tokens for Service Bus only, not {list(scopes)}")
        token, expires = self._issuer.token(self.principal, self._authority, lifetime=self._lifetime)
        return AccessToken(token, expires)

    def close(self) -> None:
        return None

    def __enter__(self) -> EmulatorCredential:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class AsyncEmulatorCredential:
    """The same as an azure-core ``AsyncTokenCredential`` (for ``azure.servicebus.aio``)."""

    def __init__(self, sync: EmulatorCredential) -> None:
        self._sync = sync
        self.principal = sync.principal

    def __repr__(self) -> str:
        return f"<async {self._sync!r}>"

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        return self._sync.get_token(*scopes, **kwargs)  # signing takes about a millisecond

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> AsyncEmulatorCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None
