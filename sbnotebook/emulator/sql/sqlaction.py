"""SQL rule actions (``SqlRuleAction``): what a subscription rule changes on the messages it admits.

    SET name = expression [; SET ...] [; REMOVE name]

``name`` is ``name``, ``user.name`` or ``[odd name]`` (an application property);
the expression is any expression of the filter language. Statements run in order,
each seeing what the ones before it set. ``sys.`` properties cannot be set here
(an emulator limit, refused when the rule is created rather than ignored).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .sqlfilter import MISSING, Lookup, Parameters, Parser, SqlFilterError

Properties = dict[str, Any]
Action = Callable[[Lookup, Properties], None]
_STATEMENT = re.compile(r"^\s*(SET|REMOVE)\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)


def _statements(text: str) -> list[str]:
    """Split on ';' outside string literals ('' inside a literal is a quote)."""
    out: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        if ch == ";" and not quoted:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return [s for s in out if s.strip()]


def _target(parser: Parser) -> str:
    tok = parser.expect("ident")
    scope, name = tok.value
    if scope == "sys":
        raise SqlFilterError(f"SET/REMOVE of sys.{name} is not supported by the emulator (position {tok.pos})")
    return str(name)


def _compile_statement(text: str, parameters: Parameters | None) -> Action:
    match = _STATEMENT.match(text)
    if not match:
        raise SqlFilterError(f"expected SET or REMOVE, found {text.strip()[:20]!r}")
    verb, rest = match.group(1).upper(), match.group(2)
    parser = Parser(rest, parameters)
    name = _target(parser)
    if verb == "REMOVE":
        parser.expect("end")

        def remove(ctx: Lookup, props: Properties) -> None:
            for key in [k for k in props if k.lower() == name.lower()]:
                del props[key]

        return remove
    parser.expect("op", "=")
    expr = parser.or_expr()
    parser.expect("end")

    def assign(ctx: Lookup, props: Properties) -> None:
        value = expr(ctx)
        for key in [k for k in props if k.lower() == name.lower() and k != name]:
            del props[key]  # property names are case-insensitive: one property, the new spelling
        props[name] = None if value is MISSING else value

    return assign


def compile_action(text: str, parameters: Parameters | None = None) -> Callable[[Lookup, Properties], None]:
    """Compile a rule action with the values of its ``@parameters``; calling it applies every
    statement in order to ``props`` (the message's application properties, which ``ctx`` reads)."""
    statements = [_compile_statement(s, parameters) for s in _statements(text)]
    if not statements:
        raise SqlFilterError("empty rule action")

    def run(ctx: Lookup, props: Properties) -> None:
        for statement in statements:
            statement(ctx, props)

    return run
