"""The constraints of Microsoft's Service Bus emulator config schema, as a JSON Schema (draft 7).

Transcribed from ServiceBus-Emulator/Schema/Config-schema.json of Azure/azure-service-bus-emulator-installer
(the schema its emulator's launcher validates Config.json with): every type, required field,
pattern, enumeration and bound it states, in the same structure, written once per kind of thing
here. Its descriptions' ranges that the schema does not enforce (a time to live of PT5M-PT1H, a lock
of PT5S-PT5M) are not checked by it either: ``sbnotebook topology export`` names those in notes.
"""

from __future__ import annotations

from typing import Any

# The schema writes the names' class as [\w-\.\/] (ECMA-262 reads the '-' after \w as itself); Python's
# re, which jsonschema uses, refuses that range: the same class is written [\w\-./] here.
NAME = {"type": "string", "pattern": r"^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$"}
ENTITY_OR_EMPTY = {"type": "string", "pattern": r"^$|^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$"}
DURATION = {"type": "string", "pattern": r"^P(?!$)(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+S)?)?$"}
BOOLEAN = {"type": "boolean"}
DELIVERIES = {"type": "integer", "minimum": 1, "maximum": 10}


def _entity(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"Name": NAME, "Properties": {"type": "object", "properties": properties}, **extra},
        "required": ["Name"],
    }


CORRELATION = {
    "type": "object",
    "minProperties": 1,
    "properties": {
        **{
            name: {"type": "string"}
            for name in (
                "ContentType",
                "CorrelationId",
                "Label",
                "MessageId",
                "ReplyTo",
                "ReplyToSessionId",
                "SessionId",
                "To",
            )
        },
        "Properties": {"type": "object", "minProperties": 1},
    },
}
SQL = {"type": "object", "properties": {"SqlExpression": {"type": "string"}}}
RULE = {
    "type": "object",
    "properties": {
        "Name": NAME,
        "Properties": {
            "type": "object",
            "properties": {
                "FilterType": {"type": "string", "enum": ["Correlation", "Sql"]},
                "CorrelationFilter": CORRELATION,
                "SqlFilter": SQL,
                "Action": SQL,
            },
            "required": ["FilterType"],
            "oneOf": [
                {
                    "properties": {
                        "FilterType": {"enum": ["Correlation"]},
                        "CorrelationFilter": {"type": "object", "minProperties": 1},
                    },
                    "required": ["CorrelationFilter"],
                },
                {"properties": {"FilterType": {"enum": ["Sql"]}, "SqlFilter": SQL}, "required": ["SqlFilter"]},
            ],
        },
    },
    "required": ["Name", "Properties"],
}
FORWARDING = {"ForwardDeadLetteredMessagesTo": ENTITY_OR_EMPTY, "ForwardTo": ENTITY_OR_EMPTY}
QUEUE = _entity(
    {
        "DeadLetteringOnMessageExpiration": BOOLEAN,
        "DefaultMessageTimeToLive": DURATION,
        "DuplicateDetectionHistoryTimeWindow": DURATION,
        **FORWARDING,
        "LockDuration": DURATION,
        "MaxDeliveryCount": DELIVERIES,
        "RequiresDuplicateDetection": BOOLEAN,
        "RequiresSession": BOOLEAN,
    }
)
SUBSCRIPTION = _entity(
    {
        "DeadLetteringOnMessageExpiration": BOOLEAN,
        "DefaultMessageTimeToLive": DURATION,
        "LockDuration": DURATION,
        "MaxDeliveryCount": DELIVERIES,
        **FORWARDING,
        "RequiresSession": BOOLEAN,
    },
    Rules={"type": "array", "minItems": 0, "maxItems": 1000, "items": RULE},
)
TOPIC = _entity(
    {
        "DefaultMessageTimeToLive": DURATION,
        "DuplicateDetectionHistoryTimeWindow": DURATION,
        "RequiresDuplicateDetection": BOOLEAN,
    },
    Subscriptions={"type": "array", "minItems": 1, "maxItems": 50, "items": SUBSCRIPTION},
)
TOPIC["required"] = ["Name", "Subscriptions"]
NAMESPACE = {
    "type": "object",
    "properties": {
        "Name": {**NAME, "enum": ["sbemulatorns"]},
        "Queues": {"type": "array", "minItems": 0, "maxItems": 50, "items": QUEUE},
        "Topics": {"type": "array", "minItems": 0, "maxItems": 50, "items": TOPIC},
    },
    "required": ["Name", "Queues", "Topics"],
}
SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "UserConfig": {
            "type": "object",
            "properties": {
                "Namespaces": {"type": "array", "minItems": 1, "maxItems": 1, "items": NAMESPACE},
                "Logging": {
                    "type": "object",
                    "properties": {
                        "Type": {"type": "string", "enum": ["File", "Console", "File,Console", "Console,File"]}
                    },
                    "required": ["Type"],
                },
            },
            "required": ["Namespaces", "Logging"],
        }
    },
    "required": ["UserConfig"],
}
