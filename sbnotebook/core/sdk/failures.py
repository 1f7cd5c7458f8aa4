"""What a failure the SDK (or the service behind it) raised means, decided here only.

``from_sdk`` translates an SDK exception into the kit's family (``errors.py``: message redacted,
tracking id kept, whether a retry could help); the ``is_...`` predicates answer the questions callers
ask of a failure (a lost connection, a lost lock, a session held elsewhere, a right missing), so no
caller reads an exception's message itself; ``sign_in_failure`` and ``role_needed`` say in one line
what a credential or a key lacked. ``SERVICE_ERRORS`` is what a failed call to Service Bus can raise.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import (
    ConfigurationError,
    EntityNotFoundError,
    LockLostError,
    MessageTooLargeError,
    SbError,
    ServiceError,
    SessionLockedError,
    condition_of,
    tracking_id_of,
)
from .api import (
    AzureError,
    MessageLockLostError,
    ResourceNotFoundError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    sdk_errors,
)

_SESSION = re.compile(r"session '([^']*)'")
# Service Bus's condition for a key or token refused an operation (a right it lacks); the
# administration API's HTTP 401 is given the same condition (core/operations/counts.py ``admin_error``).
UNAUTHORIZED = "amqp:unauthorized-access"


# Service Bus names the claim an operation needed ("'Listen' claim(s) are required", "Manage,EntityRead
# claims required"); with Entra ID a claim comes from a role, which is what a user can ask for.
_CLAIM = re.compile(r"'(Send|Listen|Manage)' claim\(s\) are required|\b(Manage),EntityRead claims required")
ROLE_FOR_CLAIM = {
    "Send": "Azure Service Bus Data Sender (or Azure Service Bus Data Owner)",
    "Listen": "Azure Service Bus Data Receiver (or Azure Service Bus Data Owner)",
    "Manage": "Azure Service Bus Data Owner",
}
_DOING = {"Send": "sending", "Listen": "receiving, peeking and settling", "Manage": "the administration API"}


def role_needed(text: str, where: str = "") -> str | None:
    """One line naming the role a refused operation needs, or None if ``text`` names no claim."""
    match = _CLAIM.search(text)
    if match is None:
        return None
    claim = match.group(1) or match.group(2)
    return (
        f"Access refused{where}: {_DOING[claim]} needs the '{claim}' right: with Entra ID the role "
        f"{ROLE_FOR_CLAIM[claim]}; with a connection string a policy with {claim}."
    )


_AADSTS = re.compile(r"AADSTS\d+: [^\r\n]*")  # Entra's code and its first line


def sign_in_failure(exc: BaseException) -> str | None:
    """What a credential that could not get a token said, in one line (Entra's AADSTS line when it
    gave one), or None if ``exc`` is not that. The SDK wraps azure-core's ClientAuthenticationError
    in its own ("Handler failed: ...", several lines); a 401 from Service Bus itself is not this."""
    seen: BaseException | None = exc
    for _ in range(4):  # the SDK's wrapper, its inner exception, a cause: never deeper
        if seen is None:
            return None
        if any(
            t.__name__ == "ClientAuthenticationError" and t.__module__ == "azure.core.exceptions"
            for t in type(seen).__mro__
        ):
            if not _raised_by_a_credential(seen):
                return None  # an HTTP 401 from the service (its admin API): the key or token was refused
            text = str(getattr(seen, "message", None) or seen)
            match = _AADSTS.search(text)
            lines = [line.strip() for line in text.strip().splitlines()] or ["no token"]
            # DefaultAzureCredential's first line says only that it failed; each credential it tried
            # has a line of its own ("\tEnvironmentCredential: ..."), the first is the one that ran.
            tried = [line for line in lines[1:] if re.match(r"\w+Credential: ", line)]
            line = match.group(0) if match else (tried or lines)[0]
            return line.rstrip("'.")  # azure-identity quotes Entra's line: '(invalid_request) AADSTS...'.
        seen = getattr(seen, "inner_exception", None) or seen.__cause__
    return None


def _raised_by_a_credential(exc: BaseException) -> bool:
    """Raised in azure-identity (or msal under it), or carrying Entra's AADSTS code."""
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(("azure.identity", "msal")):
            return True
        tb = tb.tb_next
    return "AADSTS" in str(exc)


def is_retryable(exc: BaseException) -> bool:
    """Could trying again help? Transient service and network failures: yes; bad input, auth,
    missing entities, size and quota: no."""
    transient = (
        sdk_errors.ServiceBusServerBusyError,
        sdk_errors.OperationTimeoutError,
        sdk_errors.ServiceBusConnectionError,
        sdk_errors.ServiceBusCommunicationError,
        sdk_errors.MessagingEntityDisabledError,
    )
    if isinstance(exc, transient):
        return True
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, sdk_errors.ServiceBusError) and type(exc) is sdk_errors.ServiceBusError:
        return bool(getattr(exc, "_retryable", False))
    return False


def requires_sessions(exc: BaseException) -> bool:
    """Service Bus refused a receiver without a session on a session-enabled entity (at attach)."""
    text = str(exc)
    return "requires session" in text or "non-sessionful" in text


_BYTES_REPR = re.compile(r"""\bb(["'])(.*?)\1(?=\.?$|\s)""")


def _unwrap_bytes(text: str) -> str:
    """The SDK puts a management reply's description in its message as a bytes repr
    (``List sessions failed. b"'q' is not session-enabled ..."``): show the text, not the repr."""
    return _BYTES_REPR.sub(lambda m: m.group(2), text)


def from_sdk(exc: BaseException, *, entity: str | None = None) -> SbError:
    """Translate an SDK exception into the kit's family (message redacted, tracking id kept)."""
    where = f" ({entity})" if entity else ""
    text = _unwrap_bytes(str(exc).split(" Error condition:")[0])
    if isinstance(exc, ValueError) and "does not match the EntityPath" in text:
        # The SDK refuses, before any network call, an entity other than the connection string's
        return ConfigurationError(
            f"Access refused{where}: the connection string is for one entity (its EntityPath), and a key of an "
            "entity's policy reaches only that entity: use a connection string for this entity or the namespace."
        )
    failed = sign_in_failure(exc)
    if failed is not None:
        return ConfigurationError(
            f"Sign-in failed{where}: {failed}. The credential got no token for Service Bus: check the tenant, "
            "client id and secret it uses (for DefaultAzureCredential AZURE_TENANT_ID, AZURE_CLIENT_ID, "
            "AZURE_CLIENT_SECRET; on Databricks the service credential or the cluster's identity)."
        )
    kwargs: dict[str, Any] = {
        "tracking_id": tracking_id_of(exc),
        "condition": condition_of(exc),
        "retryable": is_retryable(exc),
    }
    if isinstance(exc, sdk_errors.MessagingEntityNotFoundError):
        return EntityNotFoundError(f"Entity not found{where}: {text}", **kwargs)
    if isinstance(exc, sdk_errors.MessageSizeExceededError):
        return MessageTooLargeError(f"Message too large{where}: {text}", **kwargs)
    if isinstance(exc, (sdk_errors.MessageLockLostError, sdk_errors.SessionLockLostError)):
        return LockLostError(f"Lock lost{where}: {text}", **kwargs)
    if isinstance(exc, sdk_errors.SessionCannotBeLockedError):
        match = _SESSION.search(text)
        which = f"Session {match.group(1)!r}" if match else "The session"
        return SessionLockedError(
            f"{which}{where} is held by another receiver right now: try again once it lets the session go "
            "(or its session lock expires).",
            **kwargs,
        )
    if isinstance(exc, (sdk_errors.ServiceBusAuthenticationError, sdk_errors.ServiceBusAuthorizationError)):
        needed = role_needed(text, where)
        if needed is not None:
            return ConfigurationError(needed, **kwargs)
        return ConfigurationError(f"Access refused{where}: check the key or credential. {text}", **kwargs)
    return ServiceError(f"{type(exc).__name__}{where}: {text}", **kwargs)


# What an error means, decided here only: the callers ask, they do not read messages themselves.


def is_connection_lost(exc: BaseException) -> bool:
    """Did the transport go away (restart, network), as opposed to the broker refusing something?"""
    if isinstance(exc, (ServiceBusConnectionError, ServiceBusCommunicationError, ConnectionError)):
        return True
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        return True
    name = type(exc).__name__
    text = str(exc).lower()
    return name in {"AMQPConnectionError", "AMQPLinkError"} or (
        name == "ServiceBusError" and ("detached" in text or "connection" in text or "socket" in text)
    )


def is_entity_not_found(exc: BaseException) -> bool:
    """The entity does not exist: the broker says so (at attach, or detaching a link of one deleted),
    the administration API answers 404 (``ResourceNotFoundError``), or the kit raised
    :class:`EntityNotFoundError`."""
    return isinstance(exc, (sdk_errors.MessagingEntityNotFoundError, ResourceNotFoundError, EntityNotFoundError))


def is_management_link_lost(exc: BaseException) -> bool:
    """The SDK's management link failed under a request: what it raises (a ServiceBusError wrapping
    its own ValueError, without the broker's condition) when the broker detached that link."""
    return isinstance(exc, sdk_errors.ServiceBusError) and "Management Operation error occurred" in str(exc)


def is_lock_lost(exc: BaseException) -> bool:
    """A settlement or renewal failed because the message's lock is gone (expired or lost)."""
    return isinstance(exc, (MessageLockLostError, LockLostError)) or "lock" in str(exc).lower()


def is_message_not_found(exc: BaseException) -> bool:
    """No message with that sequence number (a deferred receive of one that is not deferred)."""
    text = str(exc)
    return "MessageNotFound" in text or "message-not-found" in text or "deferred message" in text


def is_session_locked(exc: BaseException) -> bool:
    """Another receiver holds the session's lock."""
    if isinstance(exc, SessionLockedError):
        return True
    condition = getattr(exc, "condition", None) or condition_of(exc) or ""
    return "sessioncannotbelocked" in f"{type(exc).__name__} {exc} {condition}".lower().replace("-", "")


def is_unauthorized(exc: BaseException) -> bool:
    """The broker refused this operation to the key or credential (Unauthorized: a right it lacks,
    or a key it does not accept), as opposed to a credential that got no token or any other failure."""
    condition = getattr(exc, "condition", None) or condition_of(exc)
    return condition == UNAUTHORIZED


def is_no_session_available(exc: BaseException) -> bool:
    """A receive for the next available session found none free with messages (it timed out)."""
    return "No session is available" in str(exc)


SERVICE_ERRORS: tuple[type[Exception], ...] = (SbError, AzureError)
"""What a failed call to Service Bus can raise (``except core.SERVICE_ERRORS``): the kit's errors,
and the SDK's own where a layer above calls the SDK through a core object (a batch's receiver, a
panel's client)."""
