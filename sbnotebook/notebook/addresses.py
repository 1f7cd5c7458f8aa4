"""``ENTITY`` or ``NAME:ENTITY``: which connection an entity typed by a user belongs to. The one
reader of that prefix above core (``core.split_address`` checks it; the rest is an ``EntityPath``):
the magics (magics/targets.py) and the panels' entity boxes go through :func:`resolve`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core import EntityNameError, LiveConnection, split_address


def resolve(
    text: str, default: Callable[[], LiveConnection], named: Callable[[str], LiveConnection]
) -> tuple[str, LiveConnection]:
    """(the entity, its connection): ``default()`` without a prefix, ``named(NAME)`` with one. A colon
    in the wrong place, a bad name or no entity is an ``EntityNameError``; an unknown name is what
    ``named`` raises."""
    if ":" not in text:
        return text, default()
    name, _ = split_address(text)
    assert name is not None
    return text.split(":", 1)[1].strip(), named(name)


def lookup(connections: Mapping[str, LiveConnection]) -> Callable[[str], LiveConnection]:
    """``named`` for a panel: the connections ``%sb_connect --as`` named, passed to it."""

    def named(name: str) -> LiveConnection:
        found = connections.get(name)
        if found is None:
            known = ", ".join(sorted(connections)) or "none"
            raise EntityNameError(f"No connection named {name!r} (named: {known}): %sb_connect --as {name} adds it.")
        return found

    return named
