"""The evaluator against Microsoft's pages: every case of ``documented.CASES`` (each citing its
line), the AND / OR truth tables, and filters outside the grammar refused with their position."""

from __future__ import annotations

from typing import Any

import pytest

from sbnotebook.sqlrules.context import MessageProperties
from sbnotebook.sqlrules.lexer import SqlFilterError
from sbnotebook.sqlrules.sqlfilter import compile_filter
from tests.sqlrules.documented import AND_TABLE, CASES, OR_TABLE, REFUSED, TRUTH, Case


def mismatches(cases: list[Case]) -> list[tuple[str, int, Any, Any]]:
    """(case, message, expected, got) for every message whose outcome is not the documented one."""
    out = []
    for case in cases:
        flt = compile_filter(case.sql, case.parameters)
        for i, (props, expected) in enumerate(case.messages):
            got = flt.evaluate(MessageProperties(props, case.system))
            if got is not expected:
                out.append((case.name, i, expected, got))
    return out


def test_every_documented_case_has_its_documented_outcome() -> None:
    assert mismatches(CASES) == []
    # The comparison can fail: a made-up case expecting what the page does not say.
    wrong = Case("made-up", "a-b = 1", "none", [({"a": 3, "b": 2}, False), ({"a-b": 1}, True)])
    assert mismatches([wrong]) == [("made-up", 0, False, True), ("made-up", 1, True, None)]


def _truth(sql: str) -> bool | None:
    return compile_filter(sql).evaluate(MessageProperties({"t": 1}))


@pytest.mark.parametrize(("table", "word"), [(AND_TABLE, "AND"), (OR_TABLE, "OR")])
def test_the_truth_tables_of_the_page(table: dict[tuple[Any, Any], Any], word: str) -> None:
    """FILTER, "Unknown evaluation in AND operator" / "in OR operator": the 3x3 tables."""
    got = {(a, b): _truth(f"({TRUTH[a]}) {word} ({TRUTH[b]})") for a, b in table}
    assert got == table
    assert {k: v for k, v in got.items() if v is not table[k]} == {}
    assert AND_TABLE != OR_TABLE  # the two tables differ, so the check tells them apart


def test_not_keeps_unknown_unknown() -> None:
    assert [_truth(f"NOT ({TRUTH[v]})") for v in (True, False, None)] == [False, True, None]


def refusal(sql: str) -> tuple[int | None, str] | None:
    try:
        compile_filter(sql, {"@known": 1})
    except SqlFilterError as exc:
        return exc.position, str(exc)
    return None


@pytest.mark.parametrize(("sql", "position", "reason"), REFUSED)
def test_a_filter_outside_the_grammar_is_refused_with_its_position(sql: str, position: int, reason: str) -> None:
    found = refusal(sql)
    assert found is not None, f"{sql!r} was accepted"
    at, message = found
    assert at == position and reason in message and f"position {position}" in message
    if position < len(sql):
        assert repr(sql[position : position + 30]) in message  # the text there, quoted


def test_the_refusal_check_can_fail() -> None:
    assert refusal("a = @known") is None
    assert refusal("[a = 1")[0] == 0  # type: ignore[index]
