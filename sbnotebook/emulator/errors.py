"""Broker-side errors, each carrying the AMQP error condition Service Bus uses.

BrokerError                    condition + description (+ tracking id)
├── EntityNotFound             amqp:not-found
├── LinkDetachForced           amqp:link:detach-forced
├── MessageSizeExceeded        amqp:link:message-size-exceeded
├── LockLost                   com.microsoft:message-lock-lost
├── MessageNotFound            com.microsoft:message-not-found
├── Unauthorized               amqp:unauthorized-access
├── EntityDisabled             com.microsoft:entity-disabled
├── BadRequest                 amqp:invalid-field / com.microsoft:argument-error
├── ConnectionsQuotaExceeded   amqp:resource-limit-exceeded (a connection over the cap, at its open)
├── ConnectionForced           amqp:connection:forced (a connection without links, closed)
└── ServerError                amqp:internal-error (what Service Bus answers a batch of over 4,500 messages)
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

# How Service Bus ends its errors about entities (not found, refused descriptions).
MORE = "To know more visit https://aka.ms/sbResourceMgrExceptions."


class BrokerError(Exception):
    condition = "amqp:internal-error"
    status_code = 500

    def __init__(self, description: str, *, entity: str | None = None) -> None:
        self.tracking_id = str(uuid.uuid4())
        self.entity = entity
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        where = f", SystemTracker:emulator:{entity}" if entity else ""
        # Real Service Bus descriptions end with the tracking id; users quote it to support.
        self.description = f"{description} TrackingId:{self.tracking_id}{where}, Timestamp:{stamp}"
        super().__init__(self.description)


class EntityNotFound(BrokerError):
    condition = "amqp:not-found"
    status_code = 404


class LinkDetachForced(BrokerError):
    condition = "amqp:link:detach-forced"
    status_code = 410


class MessageSizeExceeded(BrokerError):
    condition = "amqp:link:message-size-exceeded"
    status_code = 403


class LockLost(BrokerError):
    condition = "com.microsoft:message-lock-lost"
    status_code = 410


class MessageNotFound(BrokerError):
    condition = "com.microsoft:message-not-found"
    status_code = 404


class Unauthorized(BrokerError):
    condition = "amqp:unauthorized-access"
    status_code = 401


class EntityDisabled(BrokerError):
    condition = "com.microsoft:entity-disabled"
    status_code = 400


class BadRequest(BrokerError):
    condition = "com.microsoft:argument-error"
    status_code = 400


class NotImplementedOperation(BrokerError):
    condition = "amqp:not-implemented"
    status_code = 501


class SessionCannotBeLocked(BrokerError):
    condition = "com.microsoft:session-cannot-be-locked"
    status_code = 410


class SessionLockLost(BrokerError):
    condition = "com.microsoft:session-lock-lost"
    status_code = 410


class OperationTimeout(BrokerError):
    condition = "com.microsoft:timeout"
    status_code = 408


class NotAllowed(BrokerError):
    condition = "amqp:not-allowed"
    status_code = 400


class Conflict(BrokerError):
    condition = "com.microsoft:entity-already-exists"
    status_code = 409


class ConnectionsQuotaExceeded(BrokerError):
    condition = "amqp:resource-limit-exceeded"  # the SDK: ServiceBusQuotaExceededError, not retried
    status_code = 403


class ConnectionForced(BrokerError):
    condition = "amqp:connection:forced"  # the SDK reconnects on its next operation
    status_code = 410


class ServerError(BrokerError):
    """Service Bus's answer to a request it does not serve and does not explain (its text for an
    internal error, which the SDKs retry)."""

    DESCRIPTION = (
        "The service was unable to process the request; please retry the operation. For more information on "
        "exception types and proper exception handling, please refer to http://go.microsoft.com/fwlink/?LinkId=761101"
    )

    def __init__(self, *, entity: str | None = None) -> None:
        super().__init__(self.DESCRIPTION, entity=entity)
