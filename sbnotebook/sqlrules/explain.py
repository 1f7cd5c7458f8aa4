"""Why a filter did not match a message: the first clause that failed, with the values it saw.

A filter matches only when it is TRUE. Walking the compiled pieces (``parser.Node``: each keeps its
place in the text, its parts and the properties it reads) from the top: an AND that is not TRUE
failed at its first FALSE part (else its first unknown one); an OR failed at every part; a NOT at
its part that was TRUE (or unknown); anything else is a clause, named as written. Evaluating a
piece again costs nothing here: explaining happens once per message and subscription a user asks
about, never in the broker's path.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .context import MISSING, PropertySource
from .parser import Node


@dataclass(frozen=True)
class Seen:
    """A property a clause read: as written (``sys.Label``, ``user.region``), and its value (MISSING
    for a user property that does not exist, None for a system property that is not set)."""

    name: str
    value: Any

    def describe(self) -> str:
        if self.value is MISSING:
            return f"{self.name} does not exist"
        if self.value is None:
            return f"{self.name} is NULL"
        return f"{self.name} was {literal(self.value)}"


@dataclass(frozen=True)
class Clause:
    """A clause that kept a filter from matching: its text, its value (False, or None: unknown),
    its operator (``=``, ``IN (...)``, ``LIKE``, ...), the properties it read."""

    text: str
    result: bool | None
    operator: str = ""
    seen: tuple[Seen, ...] = ()

    def describe(self) -> str:
        """``sys.Label = 'refund'`` was ``'return'``; ``user.region`` does not exist, so ``IN (...)`` is unknown."""
        said = "; ".join(s.describe() for s in self.seen)
        if self.result is None:
            what = f"so {self.operator} is unknown" if self.operator else "so it is unknown"
            return f"{self.text}: {said}, {what}" if said else f"{self.text} is unknown"
        return f"{self.text} is false: {said}" if said else f"{self.text} is false"


def literal(value: Any) -> str:
    """A value as the SQL text would write it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"'{value.isoformat()}' (a DateTime)"
    if isinstance(value, dt.timedelta):
        return f"{value} (a TimeSpan)"
    if isinstance(value, (bytes, bytearray)):
        return f"0x{bytes(value).hex()} (binary)"
    return str(value)


def seen(props: PropertySource, scope: str, name: str) -> Seen:
    if scope == "sys":
        return Seen(f"sys.{name}", props.system(name))
    return Seen(f"user.{name}", props.user(name.lower()))


def failing(node: Node, text: str, props: PropertySource) -> list[Clause]:
    """The clauses that made ``node`` (a predicate) not TRUE for ``props``; [] when it is TRUE."""
    value = node.fn(props)
    if value is True:
        return []
    if node.logic == "and":
        results = [(part, part.fn(props)) for part in node.parts]
        first = next((p for p, v in results if v is False), None) or next(p for p, v in results if v is not True)
        return failing(first, text, props)
    if node.logic == "or":
        return [clause for part in node.parts for clause in failing(part, text, props)]
    unique = tuple(dict.fromkeys(node.reads))
    return [Clause(text[node.pos : node.end], value, node.operator, tuple(seen(props, s, n) for s, n in unique))]


def reads_of(node: Node) -> tuple[tuple[str, str], ...]:
    """Every property a compiled piece reads, its parts' included (an AND, OR or NOT keeps none of its own)."""
    found = dict.fromkeys(node.reads)
    for part in node.parts:
        found.update(dict.fromkeys(reads_of(part)))
    return tuple(found)


_EXACT = frozenset({str, int, bool, type(None)})


def values_key(reads: tuple[tuple[str, str], ...], props: PropertySource) -> tuple[Any, ...] | None:
    """What an explanation of a filter reading ``reads`` (user names lowered, as ``reads_of`` gives
    them to ``CompiledRule``) depends on, as a dict key: each value with its type (1, 1.0 and TRUE are
    equal to Python, not to the text that says what was seen), or None when a value cannot be a key."""
    key: list[Any] = []
    for scope, name in reads:
        value = props.system(name) if scope == "sys" else props.user(name)
        cls = type(value)
        key.append((cls, value) if cls in _EXACT or value is MISSING else (cls, repr(value)))
    try:
        hash(key_tuple := tuple(key))
    except TypeError:
        return None
    return key_tuple


def lowered(reads: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``reads`` as ``values_key`` takes them: user property names lowered, as filters look them up."""
    return tuple((scope, name if scope == "sys" else name.lower()) for scope, name in reads)
