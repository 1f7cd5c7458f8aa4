"""Search records by their bodies as well as their properties.

A search is a Python expression evaluated per record. The names it sees:

- every record field (``subject``, ``message_id``, ``delivery_count``, ``dead_letter_reason``,
  ``body_text``, ...);
- ``body_json``: the body parsed as JSON (fields by attribute or key: ``body_json.customer.id``,
  ``body_json["total"]``), missing when it is not JSON: the name of Spark's ``bodyFormat=json``
  column and of ``json_columns``' pandas columns, so one spelling works in all three;
- ``props``: application properties, numbers and booleans decoded (``props.priority == "high"``);
- ``text``: the body as text (``"timeout" in text``);
- old names, kept for one release (they warn once; docs/names.md): ``body`` (the JSON, or the text
  when it is not JSON) and ``$`` (``$.customer.id``), both now ``body_json``;
- ``signature``: the dead-letter signature, the reason and description with their variable parts
  masked (``signatures.py``: ``signature == "MaxDeliveryCountExceeded: Order <NUM> failed"``),
  computed only when the expression names it.

A field a message does not have is "missing": comparisons with it are false, so messages of other
shapes simply do not match instead of raising. A message the expression does raise on (``len()`` of a
number, a string compared with a number) does not match either, and is counted: where.py says how
many, by error, and fails an expression that raised on every message.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import InvalidInputError
from ..renames import deprecated
from .signatures import signature as signature_of
from .where import NotAMatch, Where

Record = dict[str, Any]
_DOLLAR = re.compile(r"\$(?=[.\[])|\$$|\$(?=\s)")
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


class _Missing:
    """A field the message does not have: falsy, equal to nothing, ordered against nothing."""

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Missing)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, _Missing)

    def __lt__(self, other: object) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __getattr__(self, name: str) -> _Missing:
        return self

    def __getitem__(self, key: object) -> _Missing:
        return self

    def __contains__(self, item: object) -> bool:
        return False

    def __iter__(self) -> Any:
        # Without it Python iterates by __getitem__, which answers every index: a loop for ever.
        # Raising makes ``any(x for x in body_json.missing)`` a non-match, as every use of a missing field is.
        raise NotAMatch("a missing field is not iterable")

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "missing"


MISSING = _Missing()


class _Obj(dict[str, Any]):
    """A JSON object whose fields read as attributes too (``body_json.customer.id``)."""

    def __getattr__(self, name: str) -> Any:
        return wrap(self.get(name, MISSING))

    def __getitem__(self, key: str) -> Any:
        return wrap(self.get(key, MISSING))


class _Arr(list[Any]):
    def __getitem__(self, index: Any) -> Any:
        try:
            return wrap(super().__getitem__(index))
        except (IndexError, TypeError):
            return MISSING


def wrap(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, _Obj):
        return _Obj(value)
    if isinstance(value, list) and not isinstance(value, _Arr):
        return _Arr(value)
    return value


def body_json(record: Record) -> Any:
    """The body parsed as JSON, or MISSING when it is not JSON text."""
    text = record.get("body_text")
    if not text:
        return MISSING
    try:
        return json.loads(text)
    except ValueError:
        return MISSING


# What a property's text that JSON reads as a number or boolean can begin with (after JSON's blanks):
# a digit, a minus, true, false, NaN, Infinity. Any other text stays text without being parsed.
_NUMBER_OR_BOOLEAN_STARTS = frozenset("-0123456789tfNI")


def _decoded(value: str) -> Any:
    if value.lstrip(" \t\n\r")[:1] not in _NUMBER_OR_BOOLEAN_STARTS:
        return value  # most property texts (a reason, an id): no parse
    try:
        decoded = json.loads(value)
    except (TypeError, ValueError):
        return value
    return decoded if isinstance(decoded, int | float | bool) else value


def namespace(record: Record, *, signature: bool = False) -> dict[str, Any]:
    """The names a search sees for ``record`` (``signature`` only when asked: it costs a masking)."""
    parsed = body_json(record)
    names = dict(record)
    names["body_json"] = wrap(parsed)
    names["body"] = wrap(parsed) if parsed is not MISSING else (record.get("body_text") or MISSING)  # old name
    names["text"] = record.get("body_text") or ""
    props = record.get("application_properties") or {}
    names["props"] = _Obj({k: _decoded(v) if isinstance(v, str) else v for k, v in props.items()})
    if signature:
        names["signature"] = signature_of(record) or MISSING
    return names


def _names(name: str, code: Any) -> bool:
    """Whether compiled ``code`` (or a comprehension inside it) uses ``name``."""
    return name in code.co_names or any(_names(name, c) for c in code.co_consts if hasattr(c, "co_names"))


def _old_names(expression: str, tree: ast.AST) -> None:
    """Say once that ``$`` and ``body`` are now ``body_json`` (they still work for one release)."""
    if _DOLLAR.search(expression):
        deprecated("'$' in a search ($.customer)", "body_json (body_json.customer)", stacklevel=3)
    if any(isinstance(node, ast.Name) and node.id == "body" for node in ast.walk(tree)):
        deprecated(
            "'body' in a search (body.customer)",
            "body_json (body_json.customer; the body as text: body_text)",
            stacklevel=3,
        )


def compile_where(expression: str) -> Where:
    """A predicate over records. Bad syntax and unknown names fail at once, with one clear message.
    A message the expression raises on does not match and is counted (where.py: ``unevaluated``,
    ``check()``)."""
    source = _DOLLAR.sub("body_json", expression.strip())
    if not source:
        raise InvalidInputError("The search expression is empty.")
    try:
        tree = ast.parse(source, mode="eval")
        code = compile(tree, "<search>", "eval")
    except SyntaxError as exc:
        raise InvalidInputError(f"Cannot read the search expression {expression!r}: {exc.msg}.") from None
    _old_names(expression, tree)
    builtins = {"len": len, "str": str, "int": int, "float": float, "any": any, "all": all, "abs": abs}
    wants_signature = _names("signature", code)

    def on_names(record: Record, names: Mapping[str, Any]) -> bool:
        try:
            # a copy: an assignment in the expression (:=) must not reach the next search of the names
            return bool(eval(code, {"__builtins__": builtins}, dict(names)))
        except NameError as exc:
            known = ", ".join(["body_json", "props", "text", "signature", *(f for f in record if f != "body")])
            raise InvalidInputError(f"Unknown name in the search: {exc.name}. Known names: {known}.") from None
        except NotAMatch:  # a loop over a field the message does not have: a non-match, as any use of one
            return False
        # Anything else it raised (a string compared with a number, ...) the Where counts and says.

    def matches(record: Record) -> bool:
        return on_names(record, namespace(record, signature=wants_signature))

    return Where(matches, expression, on_names)


WhereLike = str | Callable[[Record], bool] | None  # what every ``where=`` takes (docs/names.md)


def as_where(where: WhereLike) -> Where | None:
    """What a ``where=`` selects, as a :class:`Where`: a search expression compiled (a bad one fails
    here, before anything is read), a function wrapped; None (or an empty string) selects every
    message. The one reading of ``where`` for every function that takes it."""
    if where is None or (isinstance(where, str) and not where.strip()):
        return None
    if isinstance(where, Where):
        return where
    if isinstance(where, str):
        return compile_where(where)
    if not callable(where):
        raise InvalidInputError(f"where takes a search expression or a function of a record, not {where!r}.")
    return Where(where)


def filter_records(records: Iterable[Record], expression: str) -> list[Record]:
    """The records matching ``expression``; one that raised on every record fails (``WhereFailed``)."""
    predicate = compile_where(expression)
    found = [r for r in records if predicate(r)]
    predicate.check()
    return found


def json_columns(frame: Any, prefix: str = "body_json.") -> Any:
    """Add a column per JSON body field (nested fields flattened with dots: ``body_json.customer.id``,
    the name Spark's ``bodyFormat=json`` and a search give it); other rows get NaN."""
    import pandas as pd

    parsed = [body_json(r) for r in frame.to_dict("records")] if len(frame) else []
    objects = [p if isinstance(p, dict) else {} for p in parsed]
    if not any(objects):
        return frame
    fields = pd.json_normalize(objects).add_prefix(prefix)
    fields.index = frame.index
    return pd.concat([frame, fields], axis=1)


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
    type than the messages hold (``body_json.total == "5"`` where total is the number 5)."""
    try:
        tree = ast.parse(_DOLLAR.sub("body_json", where.strip()), mode="eval")
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
            wants_signature = _names("signature", code)
            kinds: set[str] = set()
            for record in records:
                try:
                    got = eval(code, {"__builtins__": {}}, namespace(record, signature=wants_signature))
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
