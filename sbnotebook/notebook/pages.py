"""One page of messages for a magic or a panel, with or without a search, read through ``core.scan``."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from .. import core
from ..core.live import ConnectionLike
from ..core.search import MISSING, namespace

Record = dict[str, Any]


@dataclass
class Found:
    """What a page read found: the records, how many were looked at, and where the next page starts."""

    start: int
    records: list[Record] = field(default_factory=list)
    scanned: int = 0
    next_start: int = 1
    sample: list[Record] = field(default_factory=list)  # the first scanned records, for hints

    def hint(self, where: str | None) -> str | None:
        """Why a search matched nothing, when the messages say (a number compared with a string, ...)."""
        if not where or self.records or not self.sample:
            return None
        return type_hint(where, self.sample)


SAMPLE = 200  # scanned records kept to explain an empty search
_DOLLAR = re.compile(r"\$(?=[.\[])|\$$|\$(?=\s)")
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else type(value).__name__


def _suggest(name: str, value: Any, kinds: set[str]) -> str:
    if isinstance(value, str) and "number" in kinds:
        try:
            number = float(value)
        except ValueError:
            return ""
        return f"; compare with a number: {name} == {int(number) if number.is_integer() else number}"
    if isinstance(value, int | float) and "string" in kinds:
        return f'; compare with a string: {name} == "{value}"'
    return ""


def type_hint(where: str, records: list[Record]) -> str | None:
    """A one-line hint when a comparison in ``where`` sets a field against a value of another JSON
    type than the messages hold (``body.total == "5"`` where total is the number 5)."""
    try:
        tree = ast.parse(_DOLLAR.sub("body", where.strip()), mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1 or not isinstance(node.ops[0], _COMPARISONS):
            continue
        for side, other in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
            if isinstance(side, ast.Constant) or not isinstance(other, ast.Constant):
                continue
            value = other.value
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                continue
            code = compile(ast.Expression(side), "<hint>", "eval")
            kinds: set[str] = set()
            for record in records:
                try:
                    got = eval(code, {"__builtins__": {}}, namespace(record))
                except Exception:
                    continue
                if got is not MISSING:
                    kinds.add(_kind(got))
            want = _kind(value)
            if kinds and want not in kinds:
                name = ast.unparse(side)
                return (
                    f"hint: {name} is a {' or '.join(sorted(kinds))} in the messages, but {ast.unparse(other)} "
                    f"is a {want}, so they never compare equal{_suggest(name, value, kinds)}."
                )
    return None


def find(
    entity: str,
    *,
    start: int = 1,
    count: int,
    where: str | None = None,
    scan_limit: int = 10_000,
    session_id: str | None = None,
    connection: ConnectionLike = None,
) -> Found:
    """Up to ``count`` records from sequence number ``start`` on. With ``where``, only matching
    records, looking through at most ``scan_limit`` messages and stopping as soon as ``count`` matched
    (the scan is closed then, so no further pages are read)."""
    matches = core.compile_where(where) if where else None  # a bad expression fails before any peek
    found = Found(start, next_start=start)
    limit = count if matches is None else scan_limit
    pages = core.scan(entity, start=start, limit=limit, session_id=session_id, connection=connection)
    try:
        for page in pages:
            for record in page:
                found.scanned += 1
                # Forward only: a page in another order (a dead-letter queue) never sends the next one back.
                found.next_start = max(found.next_start, int(record["sequence_number"]) + 1)
                if len(found.sample) < SAMPLE:
                    found.sample.append(record)
                if matches is None or matches(record):
                    found.records.append(record)
                    if len(found.records) >= count:
                        return found
    finally:
        pages.close()  # stops the scan's read-ahead once enough matched
    return found
