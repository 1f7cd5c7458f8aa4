"""A stand-in token issuer for credential-reference tests (``credentialRef callable:...``).

This stand-in hands out a SAS where a real credential hands out an Entra ID token (the emulator also
issues Entra ID tokens: tests/spark/test_connect.py signs in with ``ClientSecretCredential`` against
its token endpoint). Its CBS endpoint checks the token a client puts, as a
Shared Access Signature when it is one (typed ``jwt`` or ``servicebus.windows.net:sastoken``), and the
SDK puts a ``TokenCredential``'s token with type ``jwt``: so a credential whose ``get_token`` returns a
SAS for the namespace is accepted over AMQP (the admin API wants ``Authorization:
SharedAccessSignature``, so it refuses the SDK's ``Bearer`` header: the kit's existence check is then
skipped, logged). Every process that signs in (the test, Spark's planner and its executors, a Connect
server) imports this module and reads the key from its own environment: nothing but the reference
``callable:tests.stand_in_credential:credential`` travels through Spark.
"""

from __future__ import annotations

import os
import time
from typing import Any

from azure.core.credentials import AccessToken

from sbnotebook.emulator import DEFAULT_KEY_NAME
from sbnotebook.emulator.security.sas import sign

KEY = "SBNOTEBOOK_TEST_CREDENTIAL_KEY"  # the signing key, in the environment of every process that signs in
HOST = "SBNOTEBOOK_TEST_CREDENTIAL_HOST"  # the namespace's host name (default localhost)
REF = "callable:tests.stand_in_credential:credential"
ENTRA_REF = "callable:tests.stand_in_credential:entra_credential"  # a real Entra ID sign-in (below)
made: list[StandInCredential] = []  # what this process made (the tests count them)


class StandInCredential:
    """An azure-core ``TokenCredential``: a namespace-wide SAS for any scope asked."""

    def __init__(self, key: str, host: str) -> None:
        self._key = key
        self._host = host
        self.scopes: list[tuple[str, ...]] = []

    def __repr__(self) -> str:
        return f"<StandInCredential {self._host}>"  # never the key

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        expires = int(time.time()) + 3600
        return AccessToken(sign(f"sb://{self._host}", DEFAULT_KEY_NAME, self._key, expires), expires)


def credential() -> StandInCredential:
    key = os.environ.get(KEY)
    if not key:
        raise LookupError(f"{KEY} is not set in this process")
    made.append(StandInCredential(key, os.environ.get(HOST, "localhost")))
    return made[-1]


def entra_credential() -> Any:
    """Entra ID for real: azure-identity's ``ClientSecretCredential`` for the service principal in
    this process's environment (``AZURE_TENANT_ID``, ``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET``),
    from the authority ``AZURE_AUTHORITY_HOST`` (the TLS emulator's token issuer: a private authority,
    so no instance discovery), trusting the CA named by ``SBNOTEBOOK_CA_BUNDLE``. What a user's own
    ``callable:`` factory looks like; the emulator checks the JWT it issues, no key involved."""
    from azure.identity import ClientSecretCredential

    env = os.environ
    return ClientSecretCredential(
        env["AZURE_TENANT_ID"],
        env["AZURE_CLIENT_ID"],
        env["AZURE_CLIENT_SECRET"],
        authority=env["AZURE_AUTHORITY_HOST"],
        disable_instance_discovery=True,
        connection_verify=env["SBNOTEBOOK_CA_BUNDLE"],
    )
