"""Correlation filters: equality on system properties and application properties, all of them.

Microsoft's "Topic filters" page: "A match exists when an arriving message's value for a property
is equal to the value specified in the correlation filter. For string expressions, the comparison
is case-sensitive. If you specify multiple match properties, the filter combines them as a logical
AND condition". Its examples page says a filter with ``Label``, ``ReplyTo`` and ``color`` "is
equivalent to: sys.ReplyTo = '...' AND sys.Label = 'Important' AND color = 'Red'": so each field
compares as the SQL filter's ``=`` does (a number never equals a string).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .context import MISSING, PropertySource
from .explain import Clause, literal, seen
from .lexer import SqlFilterError
from .semantics import equal

# The fields a correlation filter has (the administration API's and Config.json's names), by the
# system property each one reads.
FIELDS = {
    "ContentType": "ContentType",
    "CorrelationId": "CorrelationId",
    "Label": "Label",
    "Subject": "Label",
    "MessageId": "MessageId",
    "ReplyTo": "ReplyTo",
    "ReplyToSessionId": "ReplyToSessionId",
    "SessionId": "SessionId",
    "To": "To",
}
_BY_LOWER = {k.lower(): v for k, v in FIELDS.items()}


class CorrelationFilter:
    """A compiled correlation filter; fields given as empty text or None are not compared."""

    __slots__ = ("system", "user")

    @property
    def reads(self) -> tuple[tuple[str, str], ...]:
        """What an explanation depends on (``rule.CompiledRule.reason``)."""
        return tuple(("sys", n) for n, _ in self.system) + tuple(("user", n) for n, _ in self.user)

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.system: list[tuple[str, Any]] = []
        self.user: list[tuple[str, Any]] = []
        for key, value in fields.items():
            if key.lower() == "properties":
                self.user += [(str(name).lower(), v) for name, v in (value or {}).items()]
            elif value not in (None, ""):
                prop = _BY_LOWER.get(key.lower())
                if prop is None:
                    raise SqlFilterError(f"{key!r} is not a field of a correlation filter ({', '.join(FIELDS)})")
                self.system.append((prop, value))

    def matches(self, props: PropertySource) -> bool:
        for name, value in self.system:
            if equal(props.system(name), value) is not True:
                return False
        for lowered, value in self.user:
            found = props.user(lowered)
            if found is MISSING or equal(found, value) is not True:
                return False
        return True

    def explain(self, props: PropertySource) -> list[Clause]:
        """The first field that differs, with the value seen ([] when it matches)."""
        for scope, name, value in [("sys", n, v) for n, v in self.system] + [("user", n, v) for n, v in self.user]:
            found = seen(props, scope, name)
            result = None if found.value is MISSING or found.value is None else equal(found.value, value)
            if result is not True:
                return [Clause(f"{found.name} = {literal(value)}", result, "=", (found,))]
        return []
