"""Bad input never loses data: what analysts type (entity names, --where expressions, row ranges,
cell bodies, JSON patches) is fuzzed with Hypothesis. Each input either works or fails with one of
the kit's errors in one line, and a failure leaves the broker exactly as it was.

One emulator is shared by the module (examples must be fast); the broker's counts are compared
before and after each example."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sbnotebook import core
from sbnotebook.core import EntityPath
from sbnotebook.emulator import Emulator
from sbnotebook.notebook.cells import parse_cell, parse_rows
from tests.conftest import TEST_TOPOLOGY

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True
)
ENTITIES = ("q", "q/$deadletterqueue", "short")


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[Emulator, core.LiveConnection]]:
    with Emulator(TEST_TOPOLOGY) as emu:
        conn = core.connect(emu.connection_string, warm=False)
        core.send("q", [{"order": i, "currency": "usd" if i % 2 else "EURO"} for i in range(6)], connection=conn)
        with core.receive("q", max_messages=2, connection=conn) as batch:
            batch.dead_letter(reason="bad-currency")
        yield emu, conn
        core.close_all()


def state(emu: Emulator) -> dict[str, Any]:
    return {e: emu.broker.counts(e.split("/")[0]) for e in ENTITIES}


def one_line(exc: BaseException) -> None:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text, repr(text)


# ---------------------------------------------------------------- entity names

NAME_PARTS = st.sampled_from(["q", "Q", "t", "subscriptions", "all", "$deadletterqueue", "$dlq", "$transfer", ""])
ENTITY_TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(NAME_PARTS, st.text(max_size=6)), min_size=1, max_size=5).map("/".join),
)


@FUZZ
@given(text=ENTITY_TEXT)
def test_entity_names_parse_or_say_why_in_one_line(text: str) -> None:
    try:
        path = EntityPath.parse(text)
    except core.EntityNameError as exc:
        one_line(exc)
        return
    assert EntityPath.parse(str(path)) == path  # what it prints reads back the same


@FUZZ
@given(text=ENTITY_TEXT)
def test_peeking_any_entity_name_changes_nothing(shared: tuple[Emulator, core.LiveConnection], text: str) -> None:
    emu, conn = shared
    before = state(emu)
    try:
        core.peek(text, max_messages=5, connection=conn)
    except core.SbError as exc:
        one_line(exc)
    assert state(emu) == before


# ---------------------------------------------------------------- --where

WHERE = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda path, op, value: f"{path} {op} {value}",
        st.sampled_from(
            ["body_json.order", "$.order", "$.currency", "body.order", "props.x", "text", "len(text)", "$", "$.a.b"]
        ),
        st.sampled_from(["==", "!=", ">", "<", "in", "and", "or", "+"]),
        st.one_of(st.integers(-3, 9).map(str), st.sampled_from(['"usd"', "'EURO'", "None", "[1, 2]", "(", "$"])),
    ),
)


@FUZZ
@given(expression=WHERE)
def test_where_expressions_compile_or_say_why_and_never_crash_on_a_message(
    shared: tuple[Emulator, core.LiveConnection], expression: str
) -> None:
    emu, conn = shared
    before = state(emu)
    try:
        predicate = core.compile_where(expression)
        for record in core.peek("q", max_messages=10, connection=conn).records:
            assert predicate(record) in (True, False)
    except core.InvalidInputError as exc:
        one_line(exc)
    assert state(emu) == before


# ---------------------------------------------------------------- row ranges


@FUZZ
@given(text=st.text(alphabet="0123456789-, al", max_size=14), size=st.integers(1, 30))
def test_row_ranges_select_rows_of_the_batch_or_say_why(text: str, size: int) -> None:
    try:
        rows = parse_rows(text, size)
    except core.InvalidInputError as exc:
        one_line(exc)
        return
    if rows is not None:
        assert rows and all(0 <= r < size for r in rows)  # a selection that selects nothing is an error


# ---------------------------------------------------------------- cell bodies (%%sb_send)


@FUZZ
@given(
    cell=st.one_of(
        st.text(max_size=60),
        st.lists(
            st.one_of(st.text(max_size=12), st.builds(json.dumps, st.dictionaries(st.text(max_size=4), st.integers()))),
            max_size=4,
        ).map("\n".join),
    ),
    fmt=st.sampled_from(["json", "jsonl"]),
)
def test_json_cells_parse_or_say_which_line_before_anything_is_sent(cell: str, fmt: Any) -> None:
    try:
        items = parse_cell(cell, {}, fmt)
    except core.InvalidInputError as exc:
        one_line(exc)
        return
    assert isinstance(items, list)


# ---------------------------------------------------------------- JSON merge patches (triage)


@FUZZ
@given(
    patch=st.one_of(
        st.text(max_size=30),
        st.builds(
            json.dumps,
            st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
        ),
        st.builds(json.dumps, st.lists(st.integers(), max_size=3)),
    )
)
def test_a_patch_is_checked_before_anything_moves(shared: tuple[Emulator, core.LiveConnection], patch: str) -> None:
    from sbnotebook.notebook.widgets import TriagePanel

    emu, conn = shared
    before = state(emu)
    panel = TriagePanel("q", connection=conn)
    panel.patch.value = patch
    try:
        asked = panel.ask_resubmit(target="q")
    except core.InvalidInputError as exc:
        one_line(exc)
    else:
        assert "Type" in asked and panel.pending is not None  # prepared, waiting for the confirmation
        panel.cancel()
    assert state(emu) == before
