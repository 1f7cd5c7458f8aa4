"""core.route on messages typed by hand: every case of Microsoft's documented-semantics table
(tests/sqlrules/documented.py, each outcome cited) routes as the page says; a filter outside the
grammar is refused with its position and text; a subscription that does not get a message names the
first clause that failed, with the values seen."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.topology.evaluator import SYSTEM_FIELDS
from tests.sqlrules.documented import CASES, REFUSED, Case


def _record(case: Case, user: dict[str, Any]) -> dict[str, Any]:
    fields = {SYSTEM_FIELDS[name]: value for name, value in case.system.items() if name in SYSTEM_FIELDS}
    return {**fields, "application_properties": user}


ROUTABLE = [c for c in CASES if set(c.system) <= set(SYSTEM_FIELDS)]


def test_the_table_routes_as_the_pages_say() -> None:
    assert len(ROUTABLE) == len(CASES)  # every case's sys. properties have a record field
    for case in ROUTABLE:
        rule = core.RuleSpec(case.name, "r", "Sql", case.sql, parameters=case.parameters)
        result = core.route("docs", [_record(case, user) for user, _ in case.messages], rules=[rule])
        got = [r.matched for r in result.routed]
        assert got == [outcome is True for _, outcome in case.messages], case.name


@pytest.mark.parametrize(("sql", "position", "words"), REFUSED)
def test_a_filter_outside_the_grammar_is_refused_with_its_position(sql: str, position: int, words: str) -> None:
    with pytest.raises(core.InvalidInputError, match=f"what if: .*{re.escape(words)}.* at position {position}"):
        core.route("docs", [{}], rules=[], extra_rules=[sql])


def test_the_first_failing_clause_is_named_with_the_values_seen() -> None:
    rules = {"eu": ["sys.Label = 'refund' AND user.region IN ('eu', 'uk')"], "big": ["priority * 2 > 10"]}
    order = core.typed_in({"message_id": "17", "subject": "return", "priority": 3})
    (eu, big) = core.route("orders", [order], rules=rules).routed
    assert eu.why_not == ("rule1: sys.Label = 'refund' is false: sys.Label was 'return'",)
    assert big.why_not == ("rule1: priority * 2 > 10 is false: user.priority was 3",)
    refund = core.typed_in({"subject": "refund"})
    (eu, _) = core.route("orders", [refund], rules=rules).routed
    assert eu.why_not == ("rule1: user.region IN ('eu', 'uk'): user.region does not exist, so IN (...) is unknown",)
    # A message that matches has no why-not; one that does not always has one.
    (eu, _) = core.route("orders", [core.typed_in({"subject": "refund", "region": "eu"})], rules=rules).routed
    assert eu.matched and eu.why_not == ()


def test_an_or_names_each_side_and_a_correlation_filter_its_field() -> None:
    rules = [
        core.RuleSpec("either", "r", "Sql", "region = 'eu' OR priority > 5"),
        core.RuleSpec("corr", "c", "Correlation", correlation={"Label": "order", "Properties": {"region": "eu"}}),
    ]
    (either, corr) = core.route(
        "t", [core.typed_in({"subject": "order", "region": "us", "priority": 1})], rules=rules
    ).routed
    assert either.why_not == (
        "r: region = 'eu' is false: user.region was 'us'; or priority > 5 is false: user.priority was 1",
    )
    assert corr.why_not == ("c: user.region = 'eu' is false: user.region was 'us'",)


def test_an_action_s_properties_and_the_summary() -> None:
    rules = [
        core.RuleSpec("eu", "tag", "Sql", "region = 'eu'", action="SET sys.Label = 'eu-' + sys.Label; SET n = n * 2"),
        core.RuleSpec("eu", "$Default", "True"),
        core.RuleSpec("us", "us", "Sql", "region = 'us'"),
    ]
    sent = [core.typed_in({"subject": "order", "region": "eu", "n": 4}), core.typed_in({"region": "apac"})]
    result = core.route("t", sent, rules=rules)
    eu = result.routed[0]
    assert [d.rule for d in eu.deliveries] == [None, "tag"]
    acted = eu.deliveries[1]
    assert acted.system_properties["Label"] == "eu-order"
    assert acted.application_properties == {"region": "eu", "n": 8, "RuleName": "tag"}
    assert result.summary() == {"eu": 3, "us": 0, "(nowhere)": 0}  # $Default: eu gets the apac one too
    assert core.route("t", sent, rules=rules[2:]).summary() == {"us": 0, "(nowhere)": 2}


def test_a_subscription_without_rules_gets_nothing_and_says_so() -> None:
    from sbnotebook.core.topology.evaluator import NO_RULES

    (none,) = core.route("t", [core.typed_in({"a": 1})], rules=[core.RuleSpec("empty", "", NO_RULES)]).routed
    assert not none.matched and none.why_not == ("no rule: a subscription without rules receives nothing",)
