"""The shared access policies of queues and topics, kept by the entities themselves.

An entity's policies go where the entity goes: journaled with its definition (``--data-dir``),
gone when it is deleted, as Service Bus forgets a deleted entity's rules. The key ring
(``security/sas.py``) reads them here when a token is checked, without the broker's lock: it reads
a dict and a tuple that a change replaces whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import EntityNotFound
from ..security.sas import Policy
from ..topology import Topology
from .brokercore import BrokerCore, locked
from .entities import Subscription
from .recorder import record


class EntityPolicyStore(BrokerCore):
    """``policies_of`` / ``entity_policies`` answer the key ring; ``set_policies`` replaces an entity's."""

    def _adopt_policies(self, topology: Topology) -> None:
        """The topology file's policies of queues and topics, onto their entities (set, not added:
        a Topology built once may serve more than one broker)."""
        by_entity: dict[str, list[Policy]] = {}
        for policy in topology.policies:
            if policy.entity is not None:
                by_entity.setdefault(policy.entity.lower(), []).append(policy)
        for name, policies in by_entity.items():
            entity = self.registry.get(name)
            if entity is not None:
                entity.props.policies = tuple(policies)

    def policies_of(self, entity: str) -> Sequence[Policy]:
        found = self.registry.get(entity)
        return () if found is None or isinstance(found, Subscription) else found.props.policies

    def entity_policies(self) -> list[Policy]:
        return [p for entity in self.registry for p in entity.props.policies]

    @locked
    def set_policies(self, name: str, policies: Iterable[Policy]) -> None:
        """Replace a queue's or topic's policies (journaled)."""
        entity = self.registry.get(name)
        if entity is None:
            raise EntityNotFound(f"The messaging entity '{name}' could not be found.", entity=name)
        entity.props.policies = tuple(policies)
        record(self.journal, entity)
