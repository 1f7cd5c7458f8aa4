"""SQL rule actions (Microsoft's "SQL rule action syntax" page): what a rule changes on the
messages it admits.

    <statements> ::= <statement> [, ...n]      <statement> ::= <action> [;]   (semicolon optional)
    <action> ::= SET <property> = <expression> | REMOVE <property>

``<property>`` and ``<expression>`` as in filters (``parser.py``). Statements run in order, each
seeing what the ones before it set. "SET performs implicit conversion if possible when the
expression type and the existing property type are different": an integer set on a property
holding a double (or a decimal) is stored as one. "Action doesn't fail if non-existent user
properties were referenced": such a value is NULL, and SET stores NULL. A ``sys.`` property the
broker sets (``SequenceNumber``, ``EnqueuedTimeUtc``, ...) cannot be a target; the page's "Action
fails if non-existent system properties were referenced" makes an unknown ``sys.`` name an error.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from . import semantics as sem
from .context import MISSING, PropertyTarget
from .lexer import ACTION_KEYWORDS, SqlFilterError, Token, tokenize
from .names import SYSTEM_PROPERTIES
from .parser import Eval, Node, Parameters, Parser

Statement = Callable[[PropertyTarget], None]


class SqlAction:
    """A compiled rule action: ``apply`` runs its statements on one message's properties."""

    __slots__ = ("_statements", "system_targets", "text")

    def __init__(self, text: str, statements: list[Statement], system_targets: list[tuple[str, int]]) -> None:
        self.text, self._statements = text, statements
        # the sys. properties it sets or removes, with their positions (for a host that cannot set some)
        self.system_targets = system_targets

    def apply(self, props: PropertyTarget) -> None:
        for statement in self._statements:
            statement(props)

    def __repr__(self) -> str:
        return f"SqlAction({self.text!r})"


def _converted(existing: Any, value: Any) -> Any:
    """C#'s implicit conversions from an integer to the existing property's type."""
    if existing is MISSING or sem.kind(value) != sem.INT:
        return value
    target = sem.kind(existing)
    if target == sem.FLOAT:
        return float(value)
    if target == sem.DEC:
        return Decimal(value)
    return value


def _set_user(name: str, expr: Eval) -> Statement:
    lowered = name.lower()

    def run(props: PropertyTarget) -> None:
        value = expr(props)
        props.set_user(name, _converted(props.user(lowered), value))

    return run


def _set_system(name: str, expr: Eval | None) -> Statement:
    def run(props: PropertyTarget) -> None:
        props.set_system(name, None if expr is None else expr(props))

    return run


def _remove_user(name: str) -> Statement:
    return lambda props: props.remove_user(name)


class _ActionParser(Parser):
    def statements(self) -> tuple[list[Statement], list[tuple[str, int]]]:
        out: list[Statement] = []
        targets: list[tuple[str, int]] = []
        while self.peek().kind != "end":
            verb = self.peek()
            if verb.kind != "kw" or verb.value not in ("SET", "REMOVE"):
                raise self.fail("expected SET or REMOVE", verb.pos)
            self.take()
            target = self._target(self.take())
            scope, name = target.prop or ("user", "")
            expr = None
            if verb.value == "SET":
                self.expect("op", "=", "'='")
                expr = self.value(self.additive()).fn
            if scope == "sys":
                targets.append((name, target.pos))
                out.append(_set_system(name, expr))
            else:
                out.append(_remove_user(name) if expr is None else _set_user(name, expr))
            self.accept("op", ";")
        if not out:
            raise self.fail("an empty rule action", 0)
        return out, targets

    def _target(self, tok: Token) -> Node:
        if tok.kind == "name" and self.peek().kind == "op" and self.peek().value == "(":
            raise self.fail("a function cannot be set or removed", tok.pos)
        node = self._property_token(tok)
        if node.prop and node.prop[0] == "sys" and not SYSTEM_PROPERTIES[node.prop[1]]:
            raise self.fail(f"sys.{node.prop[1]} is set by the broker and cannot be changed", tok.pos)
        return node


def compile_action(text: str, parameters: Parameters | None = None) -> SqlAction:
    """Compile a rule action with the values of its ``@parameters``; SqlFilterError (with the
    position and the text there) for anything outside the grammar."""
    if not text or not text.strip():
        raise SqlFilterError("an empty rule action")
    statements, targets = _ActionParser(text, tokenize(text, ACTION_KEYWORDS), parameters).statements()
    return SqlAction(text, statements, targets)
