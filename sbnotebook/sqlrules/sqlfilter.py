"""SQL filters of subscription rules, compiled once and evaluated per message.

    flt = compile_filter("sys.Label = 'order' AND [HR-EmployeeID] > @min", {"@min": 3})
    flt.matches(MessageProperties({"hr-employeeid": 5}, {"Label": "order"}))  # True

The grammar and its semantics: ``parser.py`` (what is allowed) and ``semantics.py`` (what the
operators do). A filter matches only when it evaluates to TRUE; FALSE and unknown do not match.
"""

from __future__ import annotations

from .context import PropertySource
from .explain import Clause, failing, reads_of
from .lexer import FILTER_KEYWORDS, SqlFilterError, tokenize
from .parser import Node, Parameters, Parser


class SqlFilter:
    """A compiled SQL filter (its text kept as written)."""

    __slots__ = ("_eval", "_node", "reads", "text")

    def __init__(self, text: str, node: Node) -> None:
        self.text, self._node, self._eval = text, node, node.fn
        self.reads = reads_of(node)  # what an explanation depends on (``rule.CompiledRule.reason``)

    def evaluate(self, props: PropertySource) -> bool | None:
        """TRUE, FALSE or unknown (None)."""
        result: bool | None = self._eval(props)
        return result

    def matches(self, props: PropertySource) -> bool:
        return self._eval(props) is True

    def explain(self, props: PropertySource) -> list[Clause]:
        """Why it does not match ``props``: the first clause that failed (of an OR, each side's),
        with the values it saw; [] when it matches."""
        return failing(self._node, self.text, props)

    def __repr__(self) -> str:
        return f"SqlFilter({self.text!r})"


def compile_filter(expression: str, parameters: Parameters | None = None) -> SqlFilter:
    """Compile a SQL filter with the values of its ``@parameters``; SqlFilterError (with the
    position and the text there) for anything outside the grammar."""
    if not expression or not expression.strip():
        raise SqlFilterError("an empty filter expression")
    parser = Parser(expression, tokenize(expression, FILTER_KEYWORDS), parameters)
    node = parser.condition(parser.or_expr())
    parser.end()
    return SqlFilter(expression, node)
