"""The SQL filter language of subscription rules."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sbnotebook.emulator.sql.sqlfilter import MISSING, SqlFilterError, compile_filter


def ctx(user: dict[str, Any], sys: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    def lookup(scope: str, name: str) -> Any:
        src = (sys or {}) if scope == "sys" else user
        return src.get(name, MISSING)

    return lookup


@pytest.mark.parametrize(
    ("expr", "props", "expected"),
    [
        ("color = 'red'", {"color": "red"}, True),
        ("color = 'red'", {"color": "blue"}, False),
        ("color <> 'red'", {"color": "blue"}, True),
        ("color != 'red'", {}, False),  # NULL comparison is unknown, not true
        ("size > 3 AND size <= 10", {"size": 5}, True),
        ("size > 3 OR missing = 1", {"size": 1}, False),
        ("size > 3 OR missing = 1", {"size": 9}, True),  # TRUE OR UNKNOWN
        ("NOT (size > 3)", {"size": 1}, True),
        ("NOT (missing > 3)", {}, False),  # NOT UNKNOWN is UNKNOWN
        ("color IN ('red', 'green')", {"color": "green"}, True),
        ("color NOT IN ('red', 'green')", {"color": "blue"}, True),
        ("name LIKE 'ord%'", {"name": "order-1"}, True),
        ("name LIKE 'ord_r'", {"name": "order"}, True),
        ("name NOT LIKE 'ord%'", {"name": "invoice"}, True),
        ("name LIKE '50!%' ESCAPE '!'", {"name": "50%"}, True),
        ("name LIKE '50!%' ESCAPE '!'", {"name": "500"}, False),
        ("missing IS NULL", {}, True),
        ("color IS NOT NULL", {"color": "x"}, True),
        ("EXISTS(color)", {"color": "x"}, True),
        ("EXISTS(color)", {}, False),
        ("user.color = 'x'", {"color": "x"}, True),
        ("[odd name] = 1", {"odd name": 1}, True),
        ("qty * price > 100", {"qty": 3, "price": 40}, True),
        ("qty % 2 = 1", {"qty": 3}, True),
        ("-qty < 0", {"qty": 3}, True),
        ("flag = TRUE", {"flag": True}, True),
        ("1=1", {}, True),
        ("1=0", {}, False),
        ("color = 'it''s'", {"color": "it's"}, True),
        ("n = 1.5", {"n": 1.5}, True),
        ("n = '1'", {"n": 1}, False),  # no implicit string/number conversion
        ("COLOR = 'red' and Size > 1", {"COLOR": "red", "Size": 2}, True),  # keywords any case
    ],
)
def test_expressions(expr: str, props: dict[str, Any], expected: bool) -> None:
    assert compile_filter(expr)(ctx(props)) is expected


def test_system_properties() -> None:
    f = compile_filter("sys.Label = 'order' AND sys.MessageId LIKE 'm-%'")
    assert f(ctx({}, {"Label": "order", "MessageId": "m-1"}))
    assert not f(ctx({}, {"Label": "order", "MessageId": "x"}))


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("", "empty"),
        ("color = ", "expected a value"),
        ("color = 'red' AND", "expected a value"),
        ("(a = 1", "expected )"),
        ("a = 1 b", "unexpected"),
        ("a LIKE 3", "LIKE takes a string"),
        ("foo.bar = 1", "unknown scope"),
        ("a = 1 ; drop", "unexpected character"),
        ("a NOT = 1", "expected IN or LIKE"),
    ],
)
def test_errors_say_what_and_where(expr: str, fragment: str) -> None:
    with pytest.raises(SqlFilterError, match=re.escape(fragment)):
        compile_filter(expr)


@pytest.mark.parametrize(
    ("expr", "params", "props", "expected"),
    [
        ("color = @color", {"@color": "red"}, {"color": "red"}, True),
        ("color = @color", {"@color": "red"}, {"color": "blue"}, False),
        ("size > @min AND size < @max", {"@min": 3, "@max": 10}, {"size": 5}, True),
        ("size > @Min", {"@min": 3}, {"size": 5}, True),  # names ignore case
        ("size > @min", {"min": 3}, {"size": 5}, True),  # a key without the '@'
        ("color IN (@a, @b)", {"@a": "red", "@b": "green"}, {"color": "green"}, True),
        ("flag = @on", {"@on": True}, {"flag": True}, True),
    ],
)
def test_parameters(expr: str, params: dict[str, Any], props: dict[str, Any], expected: bool) -> None:
    assert compile_filter(expr, params)(ctx(props)) is expected


def test_a_parameter_without_a_value_is_an_error_naming_it() -> None:
    with pytest.raises(SqlFilterError, match="@color at position 8"):
        compile_filter("color = @color", {"@other": 1})
