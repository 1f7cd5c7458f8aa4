"""The kit's exceptions. Every one says what went wrong in one line, never shows a secret,
and carries the broker's tracking id and whether a retry could help, where known.

    SbError
    ├── ConfigurationError          bad or missing connection settings
    ├── EntityNameError             a malformed entity address
    ├── EntityNotFoundError         the entity does not exist
    ├── InvalidInputError           messages or options the kit cannot use (bad JSON, bad types)
    │   ├── WhereFailed             a search raised on every message it was run on: nothing done
    │   └── PlaybookError           a playbook that cannot run as written: file:line:column, nothing touched
    ├── MessageTooLargeError        a message over the entity's size limit
    ├── LockLostError               a lock expired or was lost before settlement
    ├── ServiceError                any other failure reported by Service Bus
    │   └── SessionLockedError      the session is held by another receiver right now
    ├── PartlyDoneError             a later step failed after an earlier one changed messages: it
    │                               carries their sequence numbers (e.g. deferred, reminders not sent)
    │   (the layers above core add their own, here so the whole tree is in one place)
    ├── spark.OptionError           (also a ValueError) a missing or bad option, said before a job starts
    ├── spark.SendFailedError       (also a RuntimeError) a write task could not send some messages
    ├── notebook.magics.CommandFailed  (also IPython's UsageError) a command's one line; the cell fails
    ├── notebook.magics.Declined    a destructive action not confirmed: nothing done
    └── (signals caught where they are raised, never shown: magics' HelpShown, spark's _Misfit,
         core's StaleLink, NotAMatch and Unsupported, an InvalidInputError a copy's outcome reports)

tests/core/test_error_tree.py fails on any exception class of the package (the emulator aside: it imports
nothing from the rest) that is not an SbError, or not named in this tree.
"""

from __future__ import annotations

import re

_SECRETS = [
    re.compile(r"(SharedAccessKey\s*=\s*)[^;\s]+", re.IGNORECASE),
    re.compile(r"(SharedAccessSignature\s*=\s*)[^;\s]+", re.IGNORECASE),
    re.compile(r"(sig=)[^&\s;]+", re.IGNORECASE),
]
_TRACKING = re.compile(r"TrackingId:([0-9a-fA-F-]{8,})")
_CONDITION = re.compile(r"Error condition:\s*([\w.:-]+?)\.?(?:\s|$)")


def redact(text: str) -> str:
    """Remove keys and signatures from any text before it is shown or logged."""
    for pattern in _SECRETS:
        text = pattern.sub(r"\1***", text)
    return text


class SbError(Exception):
    """Base of every sbnotebook error: its ``message`` (one line, secrets redacted), the broker's
    ``tracking_id`` and AMQP error ``condition`` where known, and ``retryable``: whether trying again
    could help."""

    def __init__(
        self,
        message: str,
        *,
        tracking_id: str | None = None,
        condition: str | None = None,
        retryable: bool = False,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.tracking_id = tracking_id
        self.condition = condition
        self.retryable = retryable


class ConfigurationError(SbError):
    """Connection settings that are missing or wrong (a connection string, a credential reference)."""


class EntityNameError(SbError, ValueError):
    """A malformed entity address (``orders//x``, a ``:`` where a connection's name does not belong)."""


class EntityNotFoundError(SbError):
    """The entity does not exist on the namespace."""


class InvalidInputError(SbError, ValueError):
    """Messages or options the kit cannot use (bad JSON, a bad type or value)."""


class MessageTooLargeError(SbError):
    """A message over the entity's size limit."""


class LockLostError(SbError):
    """A message's lock expired or was lost before it was settled."""


class ServiceError(SbError):
    """Any other failure Service Bus reported (``retryable`` says whether trying again could help)."""


class SessionLockedError(ServiceError):
    """The session is held by another receiver right now."""


class PartlyDoneError(SbError):
    """A later step of a multi-step operation failed after an earlier step had changed messages
    (deferred them, say). ``sequence_numbers``: those messages, also listed in the message (the
    first 20), so nothing is left without its handle; ``cause``: the later step's error."""

    def __init__(self, message: str, *, sequence_numbers: list[int], cause: SbError) -> None:
        shown = ", ".join(map(str, sequence_numbers[:20])) + (", ..." if len(sequence_numbers) > 20 else "")
        super().__init__(
            f"{message}: {shown}",
            tracking_id=cause.tracking_id,
            condition=cause.condition,
            retryable=cause.retryable,
        )
        self.sequence_numbers = sequence_numbers
        self.cause = cause


def tracking_id_of(exc: BaseException) -> str | None:
    match = _TRACKING.search(str(exc))
    return match.group(1) if match else None


def condition_of(exc: BaseException) -> str | None:
    match = _CONDITION.search(str(exc))
    return match.group(1) if match else None
