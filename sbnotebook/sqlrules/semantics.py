"""What the operators of a SQL filter do with the values they are given (Microsoft's "SQL filter
syntax" page, "Considerations").

Values: None (NULL, or a property that does not exist: "internally evaluated as unknown"), bool,
int (``System.Int64``; AMQP's other integers too), float (``System.Double``), ``decimal.Decimal``
(``System.Decimal``), str, aware ``datetime`` (``System.DateTime``), ``timedelta``
(``System.TimeSpan``), ``uuid.UUID`` (``System.Guid``) and bytes; anything else takes part in no
operator.

"Operators follow C# implicit conversion semantics whenever possible": numbers compare and
compute across int, float and Decimal (Decimal with float has no implicit conversion in C#, so
the result is unknown); integer ``/`` and ``%`` truncate toward zero, ``-7 / 2`` is ``-3`` and
``-7 % 2`` is ``-1``; integer results wrap at 64 bits (C#'s unchecked arithmetic); a double
divided by zero is an infinity or NaN. ``+`` joins two strings; a DateTime minus a DateTime is a
TimeSpan. Where C# has no operator for the operand types (a string and a number, bools ordered,
an integer divided by zero), the emulator gives unknown: Service Bus's pages do not say what the
broker does then.
"""

from __future__ import annotations

import datetime as dt
import math
import operator
import re
import uuid
from collections.abc import Callable
from decimal import Decimal, DecimalException
from typing import Any

from .lexer import INT64

# Kinds of values; numbers are the first three.
INT, FLOAT, DEC, STR, BOOL, TIME, SPAN, GUID, OTHER = range(9)
_NUMBERS = (INT, FLOAT, DEC)
_EXACT_KINDS: dict[type, int] = {
    int: INT,
    float: FLOAT,
    Decimal: DEC,
    str: STR,
    bool: BOOL,
    dt.datetime: TIME,
    dt.timedelta: SPAN,
    uuid.UUID: GUID,
}
DECIMAL_MAX = Decimal("79228162514264337593543950335")  # System.Decimal.MaxValue


def kind(v: Any) -> int:
    found = _EXACT_KINDS.get(type(v))
    if found is not None:
        return found
    for cls in (bool, int, float, Decimal, str, dt.datetime, dt.timedelta, uuid.UUID):
        if isinstance(v, cls):  # AMQP's typed subclasses (proton's int32, symbol, char, ...)
            return _EXACT_KINDS[cls]
    return OTHER


_PY_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}


def comparison(op: str) -> Callable[[Any, Any], bool | None]:
    """``a op b``: unknown (None) when either is unknown or C# has no such operator for the two."""
    py = _PY_COMPARE[op]
    ordered = op not in ("=", "<>", "!=")

    def compare(a: Any, b: Any) -> bool | None:
        if a is None or b is None:
            return None
        ta = type(a)
        if ta is type(b) and (ta is str or ta is int or ta is float):
            return py(a, b)
        ka, kb = kind(a), kind(b)
        if ka in _NUMBERS and kb in _NUMBERS:
            if {ka, kb} == {DEC, FLOAT}:
                return None
        elif ka != kb or ka == OTHER or (ordered and ka in (BOOL, GUID)):
            return None
        try:
            return py(a, b)
        except TypeError:  # a naive datetime beside an aware one
            return None

    return compare


equal = comparison("=")


def wrap64(n: int) -> int:
    return ((n - INT64[0]) % 2**64) + INT64[0]


def _int_arith(op: str, a: int, b: int) -> int | None:
    if op in "/%":
        if b == 0 or (a == INT64[0] and b == -1):  # C#: DivideByZeroException, OverflowException
            return None
        q = abs(a) // abs(b)
        if op == "/":
            return q if (a < 0) == (b < 0) else -q
        r = abs(a) - q * abs(b)
        return -r if a < 0 else r
    return wrap64(a + b if op == "+" else a - b if op == "-" else a * b)


def _float_arith(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            if a == 0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    try:
        return math.fmod(a, b)  # C#'s % on doubles: the sign of the dividend
    except ValueError:  # x % 0, inf % y
        return math.nan


def _decimal_arith(op: str, a: Decimal, b: Decimal) -> Decimal | None:
    try:
        out = a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a / b if op == "/" else a % b
    except DecimalException:  # division by zero
        return None
    return None if abs(out) > DECIMAL_MAX else out


def _time_arith(op: str, a: Any, ka: int, b: Any, kb: int) -> Any:
    """DateTime and TimeSpan arithmetic as C# defines it (and nothing else)."""
    if op not in "+-" or kb not in (TIME, SPAN) or ka not in (TIME, SPAN):
        return None
    if op == "+" and (ka, kb) == (TIME, TIME):
        return None
    if ka == SPAN and kb == TIME:
        return None
    try:
        return a + b if op == "+" else a - b
    except (OverflowError, TypeError):
        return None


def arithmetic(op: str) -> Callable[[Any, Any], Any]:
    """``a op b`` for + - * / %: None when either is unknown or C# would not compute it."""

    def apply(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        ka, kb = kind(a), kind(b)
        if ka in _NUMBERS and kb in _NUMBERS:
            if ka == INT and kb == INT:
                return _int_arith(op, int(a), int(b))
            if DEC in (ka, kb):
                return None if FLOAT in (ka, kb) else _decimal_arith(op, Decimal(a), Decimal(b))
            return _float_arith(op, float(a), float(b))
        if ka == kb == STR:
            return str(a) + str(b) if op == "+" else None
        return _time_arith(op, a, ka, b, kb)

    return apply


def negate(a: Any) -> Any:
    k = kind(a)
    if k == INT:
        return wrap64(-int(a))
    if k in (FLOAT, DEC, SPAN):
        return -a
    return None


def plus(a: Any) -> Any:
    return a if kind(a) in (INT, FLOAT, DEC, SPAN) else None


def like_regex(pattern: str, escape: str | None) -> re.Pattern[str] | None:
    """``%`` any run of characters, ``_`` any one; the escape character makes the next one literal.
    None when the pattern ends in the escape character (nothing to escape)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 == len(pattern):
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


_LIKE_CACHE: dict[tuple[str, str | None], re.Pattern[str] | None] = {}


def like(value: Any, pattern: Any, escape: Any) -> bool | None:
    """``value LIKE pattern [ESCAPE escape]`` with patterns known only per message (another
    property): unknown unless all are strings and the escape is one character."""
    if kind(value) != STR or kind(pattern) != STR:
        return None
    if escape is not None and (kind(escape) != STR or len(escape) != 1):
        return None
    key = (str(pattern), None if escape is None else str(escape))
    if key not in _LIKE_CACHE:
        if len(_LIKE_CACHE) > 1024:
            _LIKE_CACHE.clear()
        _LIKE_CACHE[key] = like_regex(*key)
    regex = _LIKE_CACHE[key]
    return None if regex is None else regex.fullmatch(value) is not None


def both(a: bool | None, b: bool | None) -> bool | None:
    """AND's truth table on the page: F with anything is F; T with T is T; otherwise U."""
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def either(a: bool | None, b: bool | None) -> bool | None:
    """OR's truth table on the page: T with anything is T; F with F is F; otherwise U."""
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def invert(a: bool | None) -> bool | None:
    return None if a is None else not a
