"""Fault injection: the ways Service Bus fails that the kit must survive.

Rules live here as plain data; the broker applies the ones about state (rejected
sends, lost locks) and the network layer the ones about the wire (latency, slow
entities, dropped connections).

Topology-file form (an emulator extension, beside ``Queues``/``Topics``)::

    "Faults": [
      {"Entity": "orders", "RejectSends": {"Count": 3, "Condition": "ServerBusy"}},
      {"Entity": "orders", "DelayMs": 200},
      {"Entity": "orders", "DropConnectionAfterDeliveries": 5}
    ]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import BrokerError

CONDITIONS = {
    "serverbusy": ("com.microsoft:server-busy", 503, "The server is busy. Please retry."),
    "quotaexceeded": (
        "amqp:resource-limit-exceeded",
        403,
        "The maximum entity size has been reached or exceeded.",
    ),
    "entitydisabled": ("com.microsoft:entity-disabled", 400, "The messaging entity is disabled."),
    "timeout": ("com.microsoft:timeout", 408, "The operation did not complete within the allotted timeout."),
}


class FaultError(ValueError):
    """A fault rule is malformed."""


class InjectedFailure(BrokerError):
    """A failure the user asked for, with the condition Service Bus uses for it."""

    def __init__(self, kind: str, entity: str) -> None:
        self.condition, self.status_code, text = CONDITIONS[kind]
        super().__init__(f"{text} (injected by the emulator)", entity=entity)


def condition_key(name: str) -> str:
    key = name.replace("-", "").replace("_", "").lower()
    if key not in CONDITIONS:
        known = ", ".join(sorted(CONDITIONS))
        raise FaultError(f"unknown fault condition {name!r} (known: {known})")
    return key


@dataclass
class EntityFaults:
    reject: list[tuple[int, str]] = field(default_factory=list)  # [remaining, condition key]
    delay: float = 0.0  # seconds added to every reply on this entity's connections
    drop_after: int = 0  # close a receiving connection abruptly after this many deliveries

    def take_rejection(self) -> str | None:
        while self.reject:
            remaining, kind = self.reject[0]
            if remaining <= 0:
                self.reject.pop(0)
                continue
            self.reject[0] = (remaining - 1, kind)
            return kind
        return None


@dataclass
class Faults:
    entities: dict[str, EntityFaults] = field(default_factory=dict)

    def of(self, entity: str) -> EntityFaults:
        return self.entities.setdefault(entity.lower(), EntityFaults())

    def get(self, entity: str) -> EntityFaults | None:
        return self.entities.get(entity.lower())

    def reject_sends(self, entity: str, count: int, condition: str = "server-busy") -> None:
        if count < 1:
            raise FaultError("count must be at least 1")
        self.of(entity).reject.append((count, condition_key(condition)))

    def load(self, rules: list[dict[str, Any]]) -> None:
        for i, rule in enumerate(rules):
            where = f"Faults[{i}]"
            entity = rule.get("Entity")
            if not entity:
                raise FaultError(f"{where}: needs an Entity")
            known = {"Entity", "RejectSends", "DelayMs", "DropConnectionAfterDeliveries"}
            extra = set(rule) - known
            if extra:
                raise FaultError(f"{where}: unknown keys {sorted(extra)} (known: {sorted(known)})")
            if "RejectSends" in rule:
                spec = rule["RejectSends"]
                self.reject_sends(entity, int(spec.get("Count", 1)), str(spec.get("Condition", "ServerBusy")))
            if "DelayMs" in rule:
                self.of(entity).delay = float(rule["DelayMs"]) / 1000.0
            if "DropConnectionAfterDeliveries" in rule:
                self.of(entity).drop_after = int(rule["DropConnectionAfterDeliveries"])
