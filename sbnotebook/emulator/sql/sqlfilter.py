"""SQL filters of subscription rules, compiled once and evaluated per message.

    flt = compile_filter("sys.Label = 'order' AND [HR-EmployeeID] > @min", {"@min": 3})
    flt.matches(MessageProperties({"hr-employeeid": 5}, {"Label": "order"}))  # True

The grammar and its semantics: ``parser.py`` (what is allowed) and ``semantics.py`` (what the
operators do). A filter matches only when it evaluates to TRUE; FALSE and unknown do not match.
"""

from __future__ import annotations

from .context import PropertySource
from .lexer import FILTER_KEYWORDS, SqlFilterError, tokenize
from .parser import Eval, Parameters, Parser


class SqlFilter:
    """A compiled SQL filter (its text kept as written)."""

    __slots__ = ("_eval", "text")

    def __init__(self, text: str, evaluate: Eval) -> None:
        self.text, self._eval = text, evaluate

    def evaluate(self, props: PropertySource) -> bool | None:
        """TRUE, FALSE or unknown (None)."""
        result: bool | None = self._eval(props)
        return result

    def matches(self, props: PropertySource) -> bool:
        return self._eval(props) is True

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
    return SqlFilter(expression, node.fn)
