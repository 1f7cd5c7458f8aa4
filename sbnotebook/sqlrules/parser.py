"""The grammar of Microsoft's "SQL filter syntax" page, compiled to closures once per rule.

    predicate  := NOT predicate | predicate AND predicate | predicate OR predicate
                | expression {= | <> | != | > | >= | < | <=} expression
                | property IS [NOT] NULL | expression [NOT] IN (expression [, ...n])
                | expression [NOT] LIKE pattern [ESCAPE escape_char] | EXISTS (property)
                | (predicate)
    expression := constant | function | property | expression {+ | - | * | / | %} expression
                | {+ | -} expression | (expression)
    function   := newid() | property(name) | p(name)

Precedence: NOT, then AND, then OR; ``* / %`` before ``+ -``. A predicate is never a value (no
``(a = 1) = TRUE``) and a value is never a predicate (no bare ``flag``): both are refused where they
stand, as is anything else outside the grammar.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from . import semantics as sem
from .context import MISSING, PropertySource
from .lexer import SqlFilterError, Token
from .names import system_property

Eval = Callable[[PropertySource], Any]
Parameters = dict[str, Any]
_NOT_CONSTANT: Any = object()
_COMPARISONS = frozenset(("=", "<>", "!=", "<", ">", "<=", ">="))
_FUNCTIONS = ("newid", "property", "p")


@dataclass(frozen=True, slots=True)
class Node:
    """A compiled piece: ``fn`` gives its value (True/False/None for a predicate)."""

    fn: Eval
    predicate: bool
    pos: int
    prop: tuple[str, str] | None = None  # (scope, name) when it is a bare property
    const: Any = _NOT_CONSTANT
    # For explain.py (compile time only, never read per message): where the piece ends in the text,
    # "and" / "or" / "not" with its parts for a logical one, the properties it reads, its operator.
    end: int = -1
    logic: str = ""
    parts: tuple[Node, ...] = ()
    reads: tuple[tuple[str, str], ...] = ()
    operator: str = ""


def _constant(value: Any, pos: int) -> Node:
    return Node(lambda ctx: value, False, pos, const=value)


def property_node(scope: str, name: str, pos: int, text: str) -> Node:
    """``sys.Name`` (refused unless Service Bus has it) or a user property (missing reads as NULL)."""
    if scope == "sys":
        canonical = system_property(name)
        if canonical is None:
            raise SqlFilterError(f"sys.{name} is not a system property of a Service Bus message", text, pos)
        return Node(lambda ctx: ctx.system(canonical), False, pos, prop=("sys", canonical), reads=(("sys", canonical),))
    lowered = name.lower()

    def read(ctx: PropertySource) -> Any:
        value = ctx.user(lowered)
        return None if value is MISSING else value

    return Node(read, False, pos, prop=("user", name), reads=(("user", name),))


class Parser:
    def __init__(self, text: str, tokens: list[Token], parameters: Parameters | None = None) -> None:
        self.text, self.toks, self.i = text, tokens, 0
        self.parameters = {str(k).lower(): v for k, v in (parameters or {}).items()}

    def fail(self, reason: str, pos: int) -> SqlFilterError:
        return SqlFilterError(reason, self.text, pos)

    def peek(self, ahead: int = 0) -> Token:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def take(self) -> Token:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, kind: str, value: Any = None) -> bool:
        tok = self.peek()
        if tok.kind == kind and (value is None or tok.value == value):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, value: Any = None, what: str = "") -> Token:
        tok = self.peek()
        if tok.kind != kind or (value is not None and tok.value != value):
            raise self.fail(f"expected {what or value or kind}", tok.pos)
        self.i += 1
        return tok

    def value(self, node: Node, at: int | None = None) -> Node:
        """``node`` where a value must stand; ``at``: the operator it is the left operand of."""
        if node.predicate:
            raise self.fail("a condition where a value is expected", node.pos if at is None else at)
        return node

    def condition(self, node: Node) -> Node:
        """``node`` where a predicate must stand (checked when the parser is just past it)."""
        if not node.predicate:
            raise self.fail(
                "expected a comparison, IN, LIKE or IS NULL (a value alone is no condition)", self.peek().pos
            )
        return node

    def here(self) -> int:
        """Where the text consumed so far ends (spaces before the next word left out)."""
        return len(self.text[: self.peek().pos].rstrip())

    def spanned(self, node: Node, start: int, reads: tuple[tuple[str, str], ...] = (), operator: str = "") -> Node:
        """``node`` with its span, the properties it reads and its operator, for explain.py."""
        return replace(node, pos=start, end=self.here(), reads=reads or node.reads, operator=operator or node.operator)

    def end(self) -> None:
        tok = self.peek()
        if tok.kind != "end":
            raise self.fail("unexpected text after the end of the expression", tok.pos)

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.peek().kind == "kw" and self.peek().value == "OR":
            self.condition(left)
            self.take()
            left = self.spanned(_logic(sem.either, left, self.condition(self.and_expr()), "or"), left.pos)
        return left

    def and_expr(self) -> Node:
        left = self.not_expr()
        while self.peek().kind == "kw" and self.peek().value == "AND":
            self.condition(left)
            self.take()
            left = self.spanned(_logic(sem.both, left, self.condition(self.not_expr()), "and"), left.pos)
        return left

    def not_expr(self) -> Node:
        tok = self.peek()
        if self.accept("kw", "NOT"):
            node = self.condition(self.not_expr())
            inner = node.fn
            negation = Node(lambda ctx: sem.invert(inner(ctx)), True, tok.pos, logic="not", parts=(node,))
            return self.spanned(negation, tok.pos, node.reads, "NOT")
        return self.predicate()

    def predicate(self) -> Node:
        start = self.peek()
        if self.accept("kw", "EXISTS"):
            self.expect("op", "(")
            prop = self._property_token(self.take())
            self.expect("op", ")")
            return self.spanned(_exists(prop), start.pos, prop.reads, "EXISTS")
        left = self.additive()
        tok = self.peek()
        if tok.kind == "op" and tok.value in _COMPARISONS:
            self.take()
            right = self.value(self.additive())
            compared = _compare(tok.value, self.value(left, tok.pos), right, start.pos)
            return self.spanned(compared, start.pos, left.reads + right.reads, tok.value)
        if tok.kind == "kw" and tok.value == "IS":
            self.take()
            if left.prop is None:
                raise self.fail("IS [NOT] NULL follows a property", left.pos)
            is_not = self.accept("kw", "NOT")
            self.expect("kw", "NULL", "NULL")
            read = left.fn
            null_test = Node(lambda ctx: (read(ctx) is None) != is_not, True, start.pos)
            return self.spanned(null_test, start.pos, left.reads, "IS NOT NULL" if is_not else "IS NULL")
        negated = self.accept("kw", "NOT")
        word = "NOT " if negated else ""
        if self.accept("kw", "IN"):
            node = self._in(self.value(left, tok.pos), negated, start.pos)
            return self.spanned(node, start.pos, node.reads, word + "IN (...)")
        if self.accept("kw", "LIKE"):
            node = self._like(self.value(left, tok.pos), negated, start.pos)
            return self.spanned(node, start.pos, node.reads, word + "LIKE")
        if negated:
            raise self.fail("expected IN or LIKE after NOT", self.peek().pos)
        return left

    def _in(self, left: Node, negated: bool, pos: int) -> Node:
        self.expect("op", "(")
        items = [self.value(self.additive())]
        while self.accept("op", ","):
            items.append(self.value(self.additive()))
        self.expect("op", ")", "',' or ')'")
        read, fns = left.fn, [n.fn for n in items]
        texts = {n.const for n in items if type(n.const) is str}
        if len(texts) == len(items):  # all string constants: a set lookup

            def member(ctx: PropertySource) -> bool | None:
                v = read(ctx)
                if v is None:
                    return None
                return (v in texts if sem.kind(v) == sem.STR else False) != negated
        else:

            def member(ctx: PropertySource) -> bool | None:
                v = read(ctx)
                if v is None:
                    return None
                return any(sem.equal(v, f(ctx)) for f in fns) != negated

        return Node(member, True, pos, reads=_reads(left, *items))

    def _like(self, left: Node, negated: bool, pos: int) -> Node:
        pattern = self.value(self.additive())
        escape = self.value(self.additive()) if self.accept("kw", "ESCAPE") else None
        if pattern.const is not _NOT_CONSTANT and type(pattern.const) is not str:
            raise self.fail("LIKE's pattern must be a string", pattern.pos)
        if escape is not None and escape.const is not _NOT_CONSTANT and not _one_character(escape.const):
            raise self.fail("ESCAPE takes a string of one character", escape.pos)
        read = left.fn
        if type(pattern.const) is str and (escape is None or escape.const is not _NOT_CONSTANT):
            regex = sem.like_regex(pattern.const, None if escape is None else escape.const)
            if regex is None:
                raise self.fail("LIKE's pattern ends with its escape character", pattern.pos)

            def fixed(ctx: PropertySource) -> bool | None:
                v = read(ctx)
                if sem.kind(v) != sem.STR:
                    return None
                return (regex.fullmatch(v) is not None) != negated

            return Node(fixed, True, pos, reads=_reads(left, pattern, escape))
        pat, esc = pattern.fn, (None if escape is None else escape.fn)

        def varying(ctx: PropertySource) -> bool | None:
            e = None if esc is None else esc(ctx)
            if esc is not None and e is None:
                return None
            return sem.invert(sem.like(read(ctx), pat(ctx), e)) if negated else sem.like(read(ctx), pat(ctx), e)

        return Node(varying, True, pos, reads=_reads(left, pattern, escape))

    def additive(self) -> Node:
        left = self.multiplicative()
        while self.peek().kind == "op" and self.peek().value in ("+", "-"):
            op = self.take()
            left = _arith(op.value, self.value(left, op.pos), self.value(self.multiplicative()))
        return left

    def multiplicative(self) -> Node:
        left = self.unary()
        while self.peek().kind == "op" and self.peek().value in ("*", "/", "%"):
            op = self.take()
            left = _arith(op.value, self.value(left, op.pos), self.value(self.unary()))
        return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.value in ("-", "+"):
            self.take()
            inner = self.value(self.unary())
            if tok.value == "+":
                f = inner.fn
                return Node(lambda ctx: sem.plus(f(ctx)), False, tok.pos, reads=inner.reads)
            if type(inner.const) in (int, float):  # -7 is the constant -7
                return _constant(sem.negate(inner.const), tok.pos)
            f = inner.fn
            return Node(lambda ctx: sem.negate(f(ctx)), False, tok.pos, reads=inner.reads)
        return self.primary()

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind in ("num", "str"):
            return _constant(tok.value, tok.pos)
        if tok.kind == "kw" and tok.value in ("TRUE", "FALSE", "NULL"):
            return _constant({"TRUE": True, "FALSE": False, "NULL": None}[tok.value], tok.pos)
        if tok.kind == "param":
            return _constant(self._parameter(tok), tok.pos)
        if tok.kind == "name" and self.peek().kind == "op" and self.peek().value == "(":
            return self._function(tok)
        if tok.kind in ("name", "prop"):
            return self._property_token(tok)
        if tok.kind == "op" and tok.value == "(":
            inner = self.or_expr()
            self.expect("op", ")", "')'")
            return inner
        raise self.fail("expected a value" if tok.kind == "end" else f"expected a value, found {tok.value!s}", tok.pos)

    def _property_token(self, tok: Token) -> Node:
        if tok.kind == "name":
            return property_node("user", tok.value, tok.pos, self.text)
        if tok.kind == "prop":
            scope, name = tok.value
            return property_node(scope, name, tok.pos, self.text)
        raise self.fail("expected a property", tok.pos)

    def _function(self, tok: Token) -> Node:
        name = tok.value.lower()
        if name not in _FUNCTIONS:
            raise self.fail(
                f"unknown function {tok.value}() (Service Bus has newid(), property(name), p(name))", tok.pos
            )
        self.expect("op", "(")
        if name == "newid":
            self.expect("op", ")", "')' (newid takes no argument)")
            return Node(lambda ctx: uuid.uuid4(), False, tok.pos)
        arg = self.value(self.additive()).fn
        self.expect("op", ")", "')'")

        def named(ctx: PropertySource) -> Any:  # "the value of the property referenced by name"
            key = arg(ctx)
            if sem.kind(key) != sem.STR:
                return None
            value = ctx.user(str(key).lower())
            return None if value is MISSING else value

        return Node(named, False, tok.pos)

    def _parameter(self, tok: Token) -> Any:
        """A parameter's value, by its name with the '@' (as the SDKs send it) or without, in any case."""
        for key in (tok.value.lower(), tok.value[1:].lower()):
            if key in self.parameters:
                return self.parameters[key]
        raise self.fail(f"the parameter {tok.value} has no value in the rule's parameters", tok.pos)


def _one_character(value: Any) -> bool:
    return type(value) is str and len(value) == 1


def _exists(prop: Node) -> Node:
    scope, name = prop.prop or ("user", "")
    if scope == "sys":
        return Node(lambda ctx: ctx.system(name) is not None, True, prop.pos)
    lowered = name.lower()
    return Node(lambda ctx: ctx.user(lowered) is not MISSING, True, prop.pos)


def _reads(*nodes: Node | None) -> tuple[tuple[str, str], ...]:
    return tuple(r for n in nodes if n is not None for r in n.reads)


def _logic(combine: Callable[[Any, Any], Any], left: Node, right: Node, logic: str) -> Node:
    lf, rf = left.fn, right.fn
    return Node(lambda ctx: combine(lf(ctx), rf(ctx)), True, left.pos, logic=logic, parts=(left, right))


def _compare(op: str, left: Node, right: Node, pos: int) -> Node:
    cmp, lf = sem.comparison(op), left.fn
    if right.const is not _NOT_CONSTANT:
        const = right.const
        return Node(lambda ctx: cmp(lf(ctx), const), True, pos)
    rf = right.fn
    return Node(lambda ctx: cmp(lf(ctx), rf(ctx)), True, pos)


def _arith(op: str, left: Node, right: Node) -> Node:
    apply, lf, rf = sem.arithmetic(op), left.fn, right.fn
    return Node(lambda ctx: apply(lf(ctx), rf(ctx)), False, left.pos, reads=left.reads + right.reads)
