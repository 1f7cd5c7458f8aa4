"""Reading what analysts type: `%%sb_send` cell bodies and row selections (times: ``core.parse_time``)."""

from __future__ import annotations

import json
from typing import Any, Literal

from ..core import InvalidInputError

CellFormat = Literal["auto", "json", "jsonl", "python"]


def json_object(text: str, what: str, example: str) -> dict[str, Any] | None:
    """A JSON object typed in a box or an option (None when nothing was typed); otherwise one clear
    error naming ``what`` was wrong and showing the form (``example``)."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"{what}: not valid JSON ({exc}).") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"{what}: give a JSON object such as {example}.")
    return value


def _json_lines(cell: str) -> list[Any]:
    items = []
    for number, line in enumerate(cell.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"Line {number} is not valid JSON ({exc.msg} at column {exc.colno}).") from None
    return items


def _json_document(cell: str) -> list[Any]:
    try:
        value = json.loads(cell)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"Line {exc.lineno} is not valid JSON ({exc.msg} at column {exc.colno}); nothing was sent."
        ) from None
    return value if isinstance(value, list) else [value]


def _is_expression(cell: str) -> bool:
    try:
        compile(cell.strip(), "<cell>", "eval")
    except SyntaxError:
        return False
    return True


def parse_cell(cell: str, user_ns: dict[str, Any], fmt: CellFormat = "auto") -> Any:
    """The messages a `%%sb_send` cell holds: a JSON array or object, JSON lines, or a Python
    expression evaluated in the notebook (a list, a DataFrame, a generator).

    Invalid JSON is reported with its line number, before anything is sent."""
    text = cell.strip("\n")
    if not text.strip():
        raise InvalidInputError("The cell is empty: put JSON lines, a JSON array, or a Python expression in it.")
    if fmt == "json":
        return _json_document(text)
    if fmt == "jsonl":
        return _json_lines(text)
    if fmt == "python":
        return eval(text.strip(), user_ns)
    try:
        return _json_document(text)
    except InvalidInputError:
        pass
    lines = [ln for ln in text.splitlines() if ln.strip()]
    looks_like_lines = len(lines) > 1 and all(ln.lstrip().startswith(("{", "[", '"')) for ln in lines)
    if looks_like_lines:
        return _json_lines(text)
    if _is_expression(text):
        return eval(text.strip(), user_ns)
    if text.lstrip().startswith(("{", "[")):
        return _json_lines(text) if len(lines) > 1 else _json_document(text)
    raise InvalidInputError(
        "The cell is neither JSON (an array, an object, or one object per line) nor a Python expression."
    )


def parse_numbers(text: str, what: str, example: str) -> list[int]:
    """'0,2,5-7' -> [0, 2, 5, 6, 7]; anything else is refused in one line naming ``what``."""
    numbers: list[int] = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise InvalidInputError(f"The range {part!r} runs backwards: write it low-high, such as {example}.")
                if hi - lo > 1_000_000:
                    raise InvalidInputError(f"The range {part!r} spans more than a million numbers.")
                numbers.extend(range(lo, hi + 1))
            else:
                numbers.append(int(part))
        except ValueError:
            raise InvalidInputError(f"{part!r} is not a {what} or range such as {example}.") from None
    if not numbers:
        raise InvalidInputError(f"{text!r} selects nothing: give {what}s or ranges such as {example}.")
    return numbers


def parse_rows(text: str | None, size: int) -> list[int] | None:
    """'all' (or nothing) -> None; '0,2,5-7' -> [0, 2, 5, 6, 7], checked against the batch size."""
    if text is None or text.strip().lower() in ("", "all"):
        return None
    rows = parse_numbers(text, "row number", "0,2,5-7")
    for r in rows:
        if not 0 <= r < size:
            raise InvalidInputError(f"Row {r} is not in this batch (rows 0..{size - 1}).")
    return rows
