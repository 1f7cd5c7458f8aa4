"""What a compiled filter reads and a compiled action writes: a message's properties, through a
small interface the broker (and any other reader of messages) implements.

Values are the evaluator's (``semantics.py``): a reader converts its own types (AMQP timestamps,
decimals) before handing them over. A user property that does not exist is ``MISSING``; "Property
names are case-insensitive", so ``user`` is asked with the name in lower case.
"""

from __future__ import annotations

from typing import Any, Protocol


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class PropertySource(Protocol):
    def user(self, lowered: str) -> Any:
        """The application property of that name (any case), or MISSING."""

    def system(self, name: str) -> Any:
        """``sys.<name>`` by its canonical name (``names.SYSTEM_PROPERTIES``); None when not set."""


class PropertyTarget(PropertySource, Protocol):
    def set_user(self, name: str, value: Any) -> None:
        """Set an application property (replacing one of the same name in another case)."""

    def remove_user(self, name: str) -> None:
        """Remove an application property (any case); nothing if there is none."""

    def set_system(self, name: str, value: Any) -> None:
        """Set ``sys.<name>`` (canonical name); None clears it."""


class MessageProperties:
    """A message's properties held in two dicts: application properties by name, system
    properties by canonical name. For tests and for callers without a message of their own."""

    def __init__(self, user: dict[str, Any] | None = None, system: dict[str, Any] | None = None) -> None:
        self.user_properties = dict(user or {})
        self.system_properties = dict(system or {})
        self._lowered = {k.lower(): k for k in self.user_properties}
        self._values = {k.lower(): v for k, v in self.user_properties.items()}  # one lookup per read

    def user(self, lowered: str) -> Any:
        return self._values.get(lowered, MISSING)

    def system(self, name: str) -> Any:
        return self.system_properties.get(name)

    def set_user(self, name: str, value: Any) -> None:
        self.remove_user(name)
        self.user_properties[name] = value
        self._lowered[name.lower()] = name
        self._values[name.lower()] = value

    def remove_user(self, name: str) -> None:
        key = self._lowered.pop(name.lower(), None)
        if key is not None:
            del self.user_properties[key]
            del self._values[name.lower()]

    def set_system(self, name: str, value: Any) -> None:
        self.system_properties[name] = value
