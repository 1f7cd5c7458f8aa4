"""The SQL evaluator beyond the pages' own examples: C#'s operator semantics (which the filter page
says operators follow), parameters, compile-once, actions and correlation filters."""

from __future__ import annotations

import ast
import datetime as dt
import math
import re
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.sqlrules import sqlfilter
from sbnotebook.sqlrules.context import MessageProperties
from sbnotebook.sqlrules.correlation import CorrelationFilter
from sbnotebook.sqlrules.lexer import SqlFilterError
from sbnotebook.sqlrules.sqlaction import compile_action
from sbnotebook.sqlrules.sqlfilter import compile_filter

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
G = uuid.UUID("6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41")


def props(user: dict[str, Any], system: dict[str, Any] | None = None) -> MessageProperties:
    return MessageProperties(user, system)


@pytest.mark.parametrize(
    ("expr", "user", "expected"),
    [
        ("color = 'red'", {"color": "red"}, True),
        ("color <> 'red'", {"color": "blue"}, True),
        ("color != 'red'", {}, False),  # NULL comparison is unknown, not true
        ("size > 3 AND size <= 10", {"size": 5}, True),
        ("size > 3 OR missing = 1", {"size": 9}, True),  # TRUE OR UNKNOWN
        ("NOT (missing > 3)", {}, False),  # NOT UNKNOWN is UNKNOWN
        ("color NOT IN ('red', 'green')", {"color": "blue"}, True),
        ("name LIKE 'ord_r'", {"name": "order"}, True),
        ("name LIKE 'ORD%'", {"name": "order"}, False),  # case-sensitive, as = is
        ("qty * price > 100", {"qty": 3, "price": 40}, True),
        ("(qty + 1) * 2 = 8", {"qty": 3}, True),
        ("qty + 1 * 2 = 5", {"qty": 3}, True),  # * before +
        ("1=1", {}, True),
        ("1=0", {}, False),
        ("a IN (b, 'x')", {"a": 2, "b": 2}, True),  # IN takes expressions, properties included
    ],
)
def test_expressions(expr: str, user: dict[str, Any], expected: bool) -> None:
    assert compile_filter(expr).matches(props(user)) is expected


@pytest.mark.parametrize(
    ("expr", "user", "expected"),
    [
        ("a / b = 3", {"a": 7, "b": 2}, True),  # C#: integer division truncates toward zero
        ("a / b = -3", {"a": 7, "b": -2}, True),
        ("a % b = 1", {"a": 7, "b": -2}, True),  # the remainder takes the dividend's sign
        ("a / 2.0 = 3.5", {"a": 7}, True),  # long with double: double
        ("a / 0 = 0", {"a": 1}, None),  # DivideByZeroException in C#: unknown here
        ("a / 0.0 > 1.0E308", {"a": 1}, True),  # double: +Infinity
        ("a + 1 < 0", {"a": 2**63 - 1}, True),  # unchecked long arithmetic wraps
        ("d = 3 AND d + 1 = 4 AND d / 2 = 1.5", {"d": Decimal("3")}, None),  # decimal = 1.5 (a double): no operator
        ("d = 3 AND d + 1 = 4 AND d * 2 > 5", {"d": Decimal("3")}, True),
        ("d * 1.0 = 3", {"d": Decimal("3")}, None),  # decimal with double: no implicit conversion in C#
        ("s + t = 'ab'", {"s": "a", "t": "b"}, True),
        ("s + 1 = 'a1'", {"s": "a"}, None),
        ("n = '1'", {"n": 1}, None),  # no conversion between strings and numbers
        ("b = TRUE", {"b": True}, True),
        ("b > FALSE", {"b": True}, None),  # bools are not ordered in C#
        ("g = h", {"g": G, "h": G}, True),
        ("g = 'x'", {"g": G}, None),
        ("t + s > t AND t2 - t = s", {"t": T0, "t2": T0 + dt.timedelta(1), "s": dt.timedelta(1)}, True),
        ("s + t > t", {"t": T0, "s": dt.timedelta(1)}, None),  # C# has TimeSpan + DateTime? no: DateTime + TimeSpan
        ("x = x", {"x": math.nan}, False),
        ("x <> x", {"x": math.nan}, True),
        ("-n = 0 - n AND +n = n", {"n": 5}, True),
        ("-s < 'a'", {"s": "a"}, None),
    ],
)
def test_operators_follow_csharp(expr: str, user: dict[str, Any], expected: bool | None) -> None:
    assert compile_filter(expr).evaluate(props(user)) is expected


def test_system_properties() -> None:
    f = compile_filter("sys.Label = 'order' AND sys.Subject = 'order' AND sys.MessageId LIKE 'm-%'")
    assert f.matches(props({}, {"Label": "order", "MessageId": "m-1"}))
    assert not f.matches(props({}, {"Label": "order", "MessageId": "x"}))
    unset = compile_filter("sys.CorrelationId IS NULL AND NOT EXISTS(sys.CorrelationId)")
    assert unset.matches(props({})) and not unset.matches(props({}, {"CorrelationId": "c"}))


@pytest.mark.parametrize(
    ("expr", "params", "user", "expected"),
    [
        ("color = @color", {"@color": "red"}, {"color": "red"}, True),
        ("color = @color", {"@color": "red"}, {"color": "blue"}, False),
        ("size > @min AND size < @max", {"@min": 3, "@max": 10}, {"size": 5}, True),
        ("size > @Min", {"@min": 3}, {"size": 5}, True),  # names ignore case
        ("size > @min", {"min": 3}, {"size": 5}, True),  # a key without the '@'
        ("color IN (@a, @b)", {"@a": "red", "@b": "green"}, {"color": "green"}, True),
        ("name LIKE @p ESCAPE @e", {"@p": "a!%", "@e": "!"}, {"name": "a%"}, True),
    ],
)
def test_parameters(expr: str, params: dict[str, Any], user: dict[str, Any], expected: bool) -> None:
    assert compile_filter(expr, params).matches(props(user)) is expected


def test_a_parameter_without_a_value_is_an_error_naming_it() -> None:
    with pytest.raises(SqlFilterError, match="@color has no value in the rule's parameters at position 8"):
        compile_filter("color = @color", {"@other": 1})


def test_a_compiled_filter_never_parses_again(monkeypatch: pytest.MonkeyPatch) -> None:
    flt = compile_filter("sys.Label = 'a' AND n > 2 AND x LIKE 'q%' AND y IN ('a', 'b') AND z IS NULL")
    message = props({"n": 3, "x": "qq", "y": "b"}, {"Label": "a"})

    def no_parsing(*args: Any) -> Any:
        raise AssertionError("parsed again")

    monkeypatch.setattr(sqlfilter, "tokenize", no_parsing)
    assert all(flt.matches(message) for _ in range(1000))
    with pytest.raises(AssertionError, match="parsed again"):  # the patch would catch a parse
        compile_filter("a = 1")


def _acted(action: str, user: dict[str, Any], system: dict[str, Any] | None = None, **params: Any) -> Any:
    message = props(user, system)
    compile_action(action, {f"@{k}": v for k, v in params.items()}).apply(message)
    return message


def test_actions_set_and_remove_in_order() -> None:
    """ACTION: "<statement> ::= <action> [;]  Semicolon is optional." The examples page's action:
    "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';"."""
    m = _acted(
        "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';",
        {"quantity": 10, "priority": "high"},
    )
    assert (m.user_properties, m.system_properties) == ({"quantity": 5}, {"CorrelationId": "low"})
    m = _acted("SET a = 1 SET b = a + 1 REMOVE A", {})  # no semicolons; each sees the one before
    assert m.user_properties == {"b": 2}
    m = _acted("SET Color = 'red'", {"color": "blue"})  # one property, whatever the case: the new spelling
    assert m.user_properties == {"Color": "red"}
    m = _acted("SET x = missing + 1; SET g = newid(); SET p = @p", {}, p="v")
    assert m.user_properties["x"] is None and isinstance(m.user_properties["g"], uuid.UUID)
    assert m.user_properties["p"] == "v"


def test_set_converts_implicitly_to_the_existing_type() -> None:
    """ACTION: "SET performs implicit conversion if possible when the expression type and the
    existing property type are different." (long to double and to decimal are implicit in C#)."""
    m = _acted("SET x = 2; SET d = 3; SET n = 1.5", {"x": 1.5, "d": Decimal("1"), "n": 1})
    assert [(v, type(v)) for v in m.user_properties.values()] == [(2.0, float), (Decimal(3), Decimal), (1.5, float)]


@pytest.mark.parametrize(
    ("action", "position", "reason"),
    [
        ("SET sys.SequenceNumber = 1", 4, "set by the broker"),
        ("SET sys.Nope = 1", 4, "not a system property"),  # "Action fails if non-existent system properties"
        ("SET a = 1 = 2", 10, "expected SET or REMOVE"),
        ("SET a", 5, "expected '='"),
        ("DELETE a", 0, "expected SET or REMOVE"),
        ("SET a = (b > 1)", 9, "a condition where a value is expected"),
        ("SET newid() = 1", 4, "a function cannot be set"),
        ("SET a = 1,", 9, "expected SET or REMOVE"),
    ],
)
def test_an_action_outside_the_grammar_is_refused_with_its_position(action: str, position: int, reason: str) -> None:
    with pytest.raises(SqlFilterError, match=re.escape(reason)) as caught:
        compile_action(action)
    assert caught.value.position == position


def test_an_action_names_the_system_properties_it_sets() -> None:
    assert compile_action("SET sys.To = 'x'; REMOVE sys.label; SET a = 1").system_targets == [("To", 4), ("Label", 25)]


def test_correlation_filters_are_the_documented_equalities() -> None:
    """EXAMPLES: a correlation filter with Label, ReplyTo and Properties["color"] "is equivalent to:
    sys.ReplyTo = 'johndoe@contoso.com' AND sys.Label = 'Important' AND color = 'Red'"; TOPICS:
    "For string expressions, the comparison is case-sensitive."."""
    corr = CorrelationFilter({"Label": "Important", "ReplyTo": "johndoe@contoso.com", "Properties": {"color": "Red"}})
    sql = compile_filter("sys.ReplyTo = 'johndoe@contoso.com' AND sys.Label = 'Important' AND color = 'Red'")
    system = {"Label": "Important", "ReplyTo": "johndoe@contoso.com"}
    messages = [props({"color": "Red"}, system), props({"COLOR": "Red"}, system), props({"color": "red"}, system)]
    messages += [props({}, system), props({"color": "Red"}, {"Label": "Important"})]
    assert (
        [corr.matches(m) for m in messages] == [sql.matches(m) for m in messages] == [True, True, False, False, False]
    )
    assert CorrelationFilter({"CorrelationId": "Contoso"}).matches(props({}, {"CorrelationId": "Contoso"}))
    # Azure/azure-service-bus#401: a filter value "2" (text) does not match the number 2.
    assert not CorrelationFilter({"Properties": {"version": "2"}}).matches(props({"version": 2}))
    with pytest.raises(SqlFilterError, match="not a field of a correlation filter"):
        CorrelationFilter({"Colour": "x"})


def outside_imports(folder: Path) -> list[str]:
    """Imports of the folder's modules that reach past the folder and the standard library."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                name = node.module or ""
                if node.level > 1 or (node.level == 0 and name.split(".")[0] not in sys.stdlib_module_names):
                    found.append(f"{path.name}: from {'.' * node.level}{name}")
            elif isinstance(node, ast.Import):
                found += [
                    f"{path.name}: import {a.name}"
                    for a in node.names
                    if a.name.split(".")[0] not in sys.stdlib_module_names
                ]
    return found


def test_the_evaluator_imports_nothing_else_of_the_emulator(tmp_path: Path) -> None:
    """It moves below both core and the emulator (issue 61, point 3): nothing but itself and the
    standard library."""
    assert outside_imports(Path(sqlfilter.__file__).parent) == []
    (tmp_path / "bad.py").write_text("from ..broker import rules\nimport proton\n", encoding="utf-8")
    assert outside_imports(tmp_path) == ["bad.py: from ..broker", "bad.py: import proton"]
