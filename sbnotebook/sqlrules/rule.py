"""A subscription rule compiled once: its filter (SQL, true, false or correlation) and its action."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .context import PropertySource, PropertyTarget
from .correlation import CorrelationFilter
from .explain import Clause, lowered, values_key
from .parser import Parameters
from .sqlaction import SqlAction, compile_action
from .sqlfilter import SqlFilter, compile_filter

_REMEMBERED = 4096  # explanations a rule keeps
FIXED_FILTERS = {"True": "1=1", "False": "1=0"}  # Service Bus's TrueFilter and FalseFilter are these SQL filters


class CompiledRule:
    __slots__ = ("_reads", "_reasons", "action", "filter", "test")

    def __init__(self, flt: SqlFilter | CorrelationFilter, action: SqlAction | None) -> None:
        self.filter, self.action = flt, action
        self.test = flt.matches  # ``matches`` without a call in between (admits runs it per message)
        self._reads = lowered(flt.reads)
        self._reasons: dict[tuple[Any, ...], str] = {}

    def matches(self, props: PropertySource) -> bool:
        return self.filter.matches(props)

    def explain(self, props: PropertySource) -> list[Clause]:
        """Why the filter does not match ``props`` ([] when it does): ``explain.py``."""
        return self.filter.explain(props)

    def reason(self, props: PropertySource) -> str:
        """``explain`` as one line (its clauses joined by "; or "), remembered by the values the
        filter reads: messages that agree on them get the same words, worked out once (10^4 messages
        routed through 50 rules explain far fewer distinct cases)."""
        key = values_key(self._reads, props)
        said = None if key is None else self._reasons.get(key)
        if said is None:
            said = "; or ".join(c.describe() for c in self.explain(props))
            if key is not None:
                if len(self._reasons) >= _REMEMBERED:
                    self._reasons.clear()  # a bound on memory: the cases seen most come back soon
                self._reasons[key] = said
        return said

    def apply(self, props: PropertyTarget) -> None:
        """Run the action (if any) on a message the filter matched."""
        if self.action is not None:
            self.action.apply(props)


def compile_rule(
    filter_type: str,
    sql: str = "1=1",
    correlation: Mapping[str, Any] | None = None,
    parameters: Parameters | None = None,
    action: str | None = None,
    action_parameters: Parameters | None = None,
) -> CompiledRule:
    """``filter_type``: "Sql", "True", "False" or "Correlation"; SqlFilterError (with the position
    and the text there) for a filter or an action outside the grammar."""
    flt: SqlFilter | CorrelationFilter
    if filter_type == "Correlation":
        flt = CorrelationFilter(correlation or {})
    else:
        flt = compile_filter(FIXED_FILTERS.get(filter_type, sql), parameters)
    compiled_action = compile_action(action, action_parameters) if action and action.strip() else None
    return CompiledRule(flt, compiled_action)


RULE_NAME = "RuleName"  # the application property Service Bus names an acting rule's copy with


def admits(rules: Sequence[tuple[str, CompiledRule]], props: PropertySource) -> tuple[bool, list[str]]:
    """How Service Bus admits a message to a subscription with these (name, rule)s: whether one
    plain copy goes (some rule without an action matches), and the names of the matching rules with
    an action (each makes a copy of its own, its action applied and ``RULE_NAME`` set). The broker
    and core's ``route`` both ask this."""
    plain = False
    acting: list[str] = []
    for name, rule in rules:
        if rule.action is not None:
            if rule.test(props):
                acting.append(name)
        elif not plain and rule.test(props):
            plain = True
    return plain, acting
