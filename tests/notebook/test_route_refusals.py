"""The documented-semantics table (tests/sqlrules/documented.py) through %sb_route itself. Every
refused filter (``REFUSED``), typed as a what-if rule: the cell fails in one line naming the rule,
the reason, the position and the text there, never evaluated as false. Every accepted case
(``CASES``): the cell's answer is the page's, as a what-if rule or, with SQL parameters, as a rule
made through the administration API."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbnotebook.core.topology.evaluator import SYSTEM_FIELDS
from sbnotebook.emulator import Emulator
from tests import shell
from tests.conftest import TEST_TOPOLOGY
from tests.helpers import magic_fails
from tests.shell import line, loaded
from tests.sqlrules.documented import CASES, REFUSED, Case

ip = shell.ip
TOPOLOGY = {
    "UserConfig": {
        "Namespaces": [{"Name": "sbemulatorns", "Topics": [{"Name": "t", "Subscriptions": [{"Name": "all"}]}]}]
    }
}


@pytest.fixture(scope="module")
def namespace() -> Iterator[Emulator]:
    """One emulator for the module: the rules are read from a topology file, the message typed."""
    with Emulator(TEST_TOPOLOGY) as emu:
        yield emu


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(TOPOLOGY), encoding="utf-8")
    return path


def _what_if(sql: str, config: Path) -> str:
    return f"sb_route t --properties '{{\"a\": 1}}' --topology {config} --rule {shlex.quote(sql)}"


@pytest.mark.parametrize(("sql", "position", "reason"), REFUSED)
def test_a_what_if_rule_outside_the_grammar_is_refused_with_its_position(
    ip: Any, namespace: Emulator, config: Path, capsys: Any, sql: str, position: int, reason: str
) -> None:
    with loaded(ip, capsys, namespace.connection_string):
        said = magic_fails(ip, _what_if(sql, config))
    named = " ".join(f"InvalidInputError: Rule 'what-if' of what if: {sql}:".split())  # one line: spaces collapsed
    assert said.startswith(named), said
    assert reason in said and f"at position {position}" in said, said
    if position < len(sql.rstrip()):
        assert f"at position {position}: {sql[position : position + 30]!r}" in said, said
    else:
        assert f"at position {position} (the end of {sql.strip()[-30:]!r})" in said, said


def test_the_refusal_check_can_fail(ip: Any, namespace: Emulator, config: Path, capsys: Any) -> None:
    with loaded(ip, capsys, namespace.connection_string):
        frame = line(ip, _what_if("a = 1", config))  # inside the grammar: evaluated, the what-if gets it
        assert frame[frame.subscription == "what if: a = 1"].matched.tolist() == [True]
        said = magic_fails(ip, _what_if("a = 1 b = 2", config))
    assert "at position 6" in said and "at position 5" not in said  # the position is the one the page's grammar gives


def _records(case: Case) -> list[dict[str, Any]]:
    fields = {SYSTEM_FIELDS[name]: value for name, value in case.system.items()}
    return [{**fields, "application_properties": user} for user, _ in case.messages]


@pytest.mark.parametrize("case", [c for c in CASES if not c.parameters], ids=lambda c: c.name)
def test_each_case_of_the_table_routes_through_the_magic_as_the_page_says(
    ip: Any, namespace: Emulator, config: Path, capsys: Any, case: Case
) -> None:
    """The table's accepted cases (each outcome cited in tests/sqlrules/documented.py) as a what-if
    rule of %sb_route over a variable of records: the cell's DataFrame says what the page says (an
    unknown does not match). The two cases with SQL parameters, which --rule cannot carry, are below."""
    ip.user_ns["documented"] = _records(case)
    with loaded(ip, capsys, namespace.connection_string):
        frame = line(ip, f"sb_route t documented --topology {config} --rule {shlex.quote(case.sql)}")
    what_if = frame[frame.subscription == f"what if: {' '.join(case.sql.split())}"]
    assert what_if.matched.tolist() == [outcome is True for _, outcome in case.messages], case.cites


@pytest.mark.parametrize("case", [c for c in CASES if c.parameters], ids=lambda c: c.name)
def test_a_case_with_sql_parameters_routes_through_the_magic_from_the_admin_apis_rule(
    ip: Any, emulator: Emulator, admin: Any, capsys: Any, case: Case
) -> None:
    """The table's cases with SQL parameters, which --rule cannot carry: the rule made with its
    parameters through the SDK's administration client, read back by %sb_route from the same API."""
    from azure.servicebus.management import SqlRuleFilter

    admin.create_topic("documented")
    admin.create_subscription("documented", "p")
    admin.delete_rule("documented", "p", "$Default")
    admin.create_rule("documented", "p", "case", filter=SqlRuleFilter(case.sql, parameters=case.parameters))
    ip.user_ns["documented"] = _records(case)
    with loaded(ip, capsys, emulator.connection_string):
        frame = line(ip, "sb_route documented documented")
    assert frame[frame.subscription == "p"].matched.tolist() == [outcome is True for _, outcome in case.messages]
