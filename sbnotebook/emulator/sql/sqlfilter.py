"""The SQL filter language of Service Bus subscription rules (a SQL-92 subset).

Supported: comparisons (= <> != < > <= >=), AND / OR / NOT with SQL three-valued
logic, [NOT] IN (...), [NOT] LIKE 'pattern' [ESCAPE 'c'], IS [NOT] NULL,
EXISTS(prop), arithmetic (+ - * / %), string/number/TRUE/FALSE/NULL literals,
identifiers ``name``, ``user.name``, ``sys.Name`` or ``[odd name]``, and parameters ``@name``
(their values given with the rule: the SDK's ``SqlRuleFilter(..., parameters={"@name": value})``).
A missing property is NULL; a filter matches only when it evaluates to TRUE.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Lookup = Callable[[str, str], Any]  # (scope "sys"|"user", name) -> value or MISSING
Expr = Callable[[Lookup], Any]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class SqlFilterError(ValueError):
    """The expression cannot be parsed; the message gives the position."""


_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<str>'(?:[^']|'')*')"
    r"|(?P<bracket>\[[^\]]+\])"
    r"|(?P<param>@[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*)?)"
    r"|(?P<op><>|!=|<=|>=|[=<>+\-*/%(),]))"
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE", "EXISTS"}


@dataclass
class _Tok:
    kind: str
    value: Any
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SqlFilterError(f"unexpected character {text[pos:].lstrip()[:1]!r} at position {pos}")
        kind = m.lastgroup or ""
        raw = m.group(kind)
        start = m.start(kind)
        if kind == "num":
            out.append(_Tok("lit", float(raw) if any(c in raw for c in ".eE") else int(raw), start))
        elif kind == "str":
            out.append(_Tok("lit", raw[1:-1].replace("''", "'"), start))
        elif kind == "param":
            out.append(_Tok("param", raw, start))
        elif kind == "bracket":
            out.append(_Tok("ident", ("user", raw[1:-1]), start))
        elif kind == "name":
            if raw.upper() in _KEYWORDS:
                out.append(_Tok("kw", raw.upper(), start))
            else:
                scope, _, name = raw.rpartition(".")
                scope = scope.lower() or "user"
                if scope not in ("sys", "user"):
                    raise SqlFilterError(f"unknown scope {scope!r} at position {start} (use sys. or user.)")
                out.append(_Tok("ident", (scope, name), start))
        else:
            out.append(_Tok("op", raw, start))
        pos = m.end()
    out.append(_Tok("end", None, len(text)))
    return out


def _truth(v: Any) -> Any:
    return v if isinstance(v, bool) else None


def _comparable(a: Any, b: Any) -> bool:
    num = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (
        (isinstance(a, num) and isinstance(b, num))
        or (type(a) is type(b))
        or (isinstance(a, str) and isinstance(b, str))
    )


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}


def _like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape and c == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$", re.DOTALL)


Parameters = dict[str, Any]


class Parser:
    def __init__(self, text: str, parameters: Parameters | None = None) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.parameters = parameters or {}

    def parameter(self, tok: _Tok) -> Any:
        """A parameter's value, found by its name with the '@' (as the SDKs send it) or without,
        ignoring case as Service Bus does for names in filters."""
        wanted = {tok.value.lower(), tok.value[1:].lower()}
        for key, value in self.parameters.items():
            if str(key).lower() in wanted:
                return value
        raise SqlFilterError(f"the parameter {tok.value} at position {tok.pos} has no value in the rule's parameters")

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, kind: str, value: Any = None) -> bool:
        tok = self.peek()
        if tok.kind == kind and (value is None or tok.value == value):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, value: Any = None) -> _Tok:
        tok = self.peek()
        if tok.kind != kind or (value is not None and tok.value != value):
            want = value if value is not None else kind
            got = "end of expression" if tok.kind == "end" else repr(tok.value)
            raise SqlFilterError(f"expected {want} at position {tok.pos}, found {got}")
        self.i += 1
        return tok

    def parse(self) -> Expr:
        expr = self.or_expr()
        if self.peek().kind != "end":
            tok = self.peek()
            raise SqlFilterError(f"unexpected {tok.value!r} at position {tok.pos}")
        return expr

    def or_expr(self) -> Expr:
        return self._left_associative("kw", ("OR",), self.and_expr, _logic)

    def and_expr(self) -> Expr:
        return self._left_associative("kw", ("AND",), self.not_expr, _logic)

    def not_expr(self) -> Expr:
        if self.accept("kw", "NOT"):
            inner = self.not_expr()

            def negate(ctx: Lookup) -> Any:
                v = _truth(inner(ctx))
                return None if v is None else not v

            return negate
        return self.predicate()

    def predicate(self) -> Expr:
        if self.accept("kw", "EXISTS"):
            self.expect("op", "(")
            scope, name = self.expect("ident").value
            self.expect("op", ")")
            return lambda ctx: ctx(scope, name) is not MISSING
        left = self.additive()
        tok = self.peek()
        if tok.kind == "op" and tok.value in _COMPARE:
            self.take()
            right = self.additive()
            cmp = _COMPARE[tok.value]

            def compare(ctx: Lookup) -> Any:
                a, b = left(ctx), right(ctx)
                if a is MISSING or b is MISSING or a is None or b is None or not _comparable(a, b):
                    return None
                return cmp(a, b)

            return compare
        negated = self.accept("kw", "NOT")
        if self.accept("kw", "IN"):
            self.expect("op", "(")
            values = [self.additive()]
            while self.accept("op", ","):
                values.append(self.additive())
            self.expect("op", ")")

            def member(ctx: Lookup) -> Any:
                v = left(ctx)
                if v is MISSING or v is None:
                    return None
                found = any(_comparable(v, x) and v == x for x in (f(ctx) for f in values))
                return found != negated

            return member
        if self.accept("kw", "LIKE"):
            pattern = self.expect("lit").value
            escape = None
            if self.accept("kw", "ESCAPE"):
                escape = self.expect("lit").value
                if not isinstance(escape, str) or len(escape) != 1:
                    raise SqlFilterError("ESCAPE takes a single character")
            if not isinstance(pattern, str):
                raise SqlFilterError("LIKE takes a string pattern")
            regex = _like_regex(pattern, escape)

            def like(ctx: Lookup) -> Any:
                v = left(ctx)
                if not isinstance(v, str):
                    return None
                return bool(regex.match(v)) != negated

            return like
        if negated:
            raise SqlFilterError(f"expected IN or LIKE after NOT at position {self.peek().pos}")
        if self.accept("kw", "IS"):
            is_not = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            return lambda ctx: (left(ctx) in (MISSING, None)) != is_not
        return left

    def additive(self) -> Expr:
        return self._left_associative("op", ("+", "-"), self.multiplicative, _arith)

    def multiplicative(self) -> Expr:
        return self._left_associative("op", ("*", "/", "%"), self.unary, _arith)

    def _left_associative(
        self, kind: str, ops: tuple[str, ...], operand: Callable[[], Expr], combine: Callable[[str, Expr, Expr], Expr]
    ) -> Expr:
        """``operand (op operand)*`` for one precedence level (OR, AND, + -, * / %), folded from the left."""
        left = operand()
        while self.peek().kind == kind and self.peek().value in ops:
            op = self.take().value
            left = combine(op, left, operand())
        return left

    def unary(self) -> Expr:
        if self.accept("op", "-"):
            inner = self.unary()
            return lambda ctx: -v if isinstance(v := inner(ctx), (int, float)) else None
        if self.accept("op", "+"):
            return self.unary()
        return self.primary()

    def primary(self) -> Expr:
        tok = self.take()
        if tok.kind == "lit":
            value = tok.value
            return lambda ctx: value
        if tok.kind == "kw" and tok.value in ("TRUE", "FALSE", "NULL"):
            const = {"TRUE": True, "FALSE": False, "NULL": None}[tok.value]
            return lambda ctx: const
        if tok.kind == "ident":
            scope, name = tok.value
            return lambda ctx: ctx(scope, name)
        if tok.kind == "param":
            param = self.parameter(tok)
            return lambda ctx: param
        if tok.kind == "op" and tok.value == "(":
            inner = self.or_expr()
            self.expect("op", ")")
            return inner
        got = "end of expression" if tok.kind == "end" else repr(tok.value)
        raise SqlFilterError(f"expected a value at position {tok.pos}, found {got}")


def _logic(op: str, left: Expr, right: Expr) -> Expr:
    """``left AND right`` or ``left OR right`` in SQL's three-valued logic (True, False, None for
    unknown): an operand with the deciding value (False for AND, True for OR) decides the result;
    otherwise unknown stays unknown."""
    decides = op == "OR"

    def apply(ctx: Lookup) -> Any:
        a, b = _truth(left(ctx)), _truth(right(ctx))
        if a is decides or b is decides:
            return decides
        return None if a is None or b is None else not decides

    return apply


def _arith(op: str, left: Expr, right: Expr) -> Expr:
    def apply(ctx: Lookup) -> Any:
        a, b = left(ctx), right(ctx)
        if isinstance(a, bool) or isinstance(b, bool):
            return None
        if op == "+" and isinstance(a, str) and isinstance(b, str):
            return a + b
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return None
        if op in "/%" and b == 0:
            return None
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a // b if isinstance(a, int) and isinstance(b, int) else a / b
        return a % b

    return apply


def compile_filter(expression: str, parameters: Parameters | None = None) -> Callable[[Lookup], bool]:
    """Compile a SQL filter with the values of its ``@parameters``; the result returns True only
    when the filter matches."""
    if not expression or not expression.strip():
        raise SqlFilterError("empty filter expression")
    expr = Parser(expression, parameters).parse()
    return lambda ctx: expr(ctx) is True
