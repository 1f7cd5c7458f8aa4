"""The words of a SQL filter or action (Microsoft's "SQL filter syntax" page), with their positions.

- ``<regular_identifier>``: ``[[:IsLetter:]][_[:IsLetter:][:IsDigit:]]*``, Unicode letters and
  decimal digits, and not a keyword. So ``a-b`` is ``a``, ``-``, ``b``.
- ``<delimited_identifier>``: ``[...]``, "a right square bracket is represented as two right
  square brackets"; ``<quoted_identifier>``: ``"..."``, "a double quotation mark ... as two".
- ``<property>``: ``[<scope> .] <property_name>``, the scope ``sys`` or ``user`` (any case).
- constants: integers (``System.Int64``), decimals and scientific notation (``System.Double``),
  strings in single quotes ('' is a quote); ``@name`` parameters (the SDKs' ``parameters``).
Anything else is refused with its position (0-based) and the text there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INT64 = (-(2**63), 2**63 - 1)
FILTER_KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE", "EXISTS"})
ACTION_KEYWORDS = FILTER_KEYWORDS | {"SET", "REMOVE"}
_OPERATORS = ("<>", "!=", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ";")
_SCOPES = ("sys", "user")


class SqlFilterError(ValueError):
    """A filter or action outside the grammar: the message says what, where (0-based) and the text there."""

    def __init__(self, reason: str, text: str = "", position: int | None = None) -> None:
        self.reason, self.position = reason, position
        if position is None:
            super().__init__(reason)
        elif position >= len(text.rstrip()):
            super().__init__(f"{reason} at position {position} (the end of {text.strip()[-30:]!r})")
        else:
            super().__init__(f"{reason} at position {position}: {text[position : position + 30]!r}")


@dataclass(frozen=True, slots=True)
class Token:
    """``kind``: num, str, name (a regular identifier: a property or a function), prop (scope,
    name), param, kw, op or end."""

    kind: str
    value: Any
    pos: int


def _regular(text: str, i: int) -> int:
    """The end of the regular identifier starting at ``i`` (a letter there)."""
    i += 1
    while i < len(text) and (text[i] == "_" or text[i].isalpha() or text[i].isdecimal()):
        i += 1
    return i


def _enclosed(text: str, i: int, close: str, what: str) -> tuple[str, int]:
    """The name inside ``[...]`` or ``"..."`` starting at ``i`` (a doubled closer is one), and its end."""
    out: list[str] = []
    j = i + 1
    while j < len(text):
        if text[j] == close:
            if text[j + 1 : j + 2] == close:
                out.append(close)
                j += 2
                continue
            if not out:
                raise SqlFilterError(f"an empty {what}", text, i)
            return "".join(out), j + 1
        out.append(text[j])
        j += 1
    raise SqlFilterError(f"an unclosed {what}", text, i)


def _number(text: str, i: int) -> tuple[Any, int]:
    j = i
    while j < len(text) and text[j].isascii() and text[j].isdigit():
        j += 1
    exact = True
    if text[j : j + 1] == ".":
        exact = False
        j += 1
        while j < len(text) and text[j].isascii() and text[j].isdigit():
            j += 1
    if text[j : j + 1] in ("e", "E"):
        k = j + 1 + (text[j + 1 : j + 2] in ("+", "-"))
        if not (k < len(text) and text[k].isascii() and text[k].isdigit()):
            raise SqlFilterError("an exponent without digits", text, i)
        exact, j = False, k
        while j < len(text) and text[j].isascii() and text[j].isdigit():
            j += 1
    raw = text[i:j]
    if raw == ".":
        raise SqlFilterError("a '.' that is neither a scope's nor a number's", text, i)
    if exact:
        value = int(raw)
        if not INT64[0] <= value <= INT64[1]:
            raise SqlFilterError("an integer constant outside System.Int64", text, i)
        return value, j
    return float(raw), j


def _string(text: str, i: int) -> tuple[str, int]:
    out: list[str] = []
    j = i + 1
    while j < len(text):
        if text[j] == "'":
            if text[j + 1 : j + 2] == "'":
                out.append("'")
                j += 2
                continue
            return "".join(out), j + 1
        out.append(text[j])
        j += 1
    raise SqlFilterError("an unclosed string constant", text, i)


def _property_name(text: str, i: int, keywords: frozenset[str]) -> tuple[str, int]:
    """The ``<property_name>`` after a scope's '.'."""
    c = text[i : i + 1]
    if c == "[":
        return _enclosed(text, i, "]", "delimited identifier [...]")
    if c == '"':
        return _enclosed(text, i, '"', 'quoted identifier "..."')
    if c and c.isalpha():
        end = _regular(text, i)
        if text[i:end].upper() in keywords:
            raise SqlFilterError(f"the keyword {text[i:end]} used as a property name (write [{text[i:end]}])", text, i)
        return text[i:end], end
    raise SqlFilterError("expected a property name after the scope", text, i)


def _word(text: str, i: int, keywords: frozenset[str]) -> tuple[Token, int]:
    end = _regular(text, i)
    word = text[i:end]
    if text[end : end + 1] == ".":
        if word.lower() not in _SCOPES:
            raise SqlFilterError(f"unknown scope {word!r} (a property's scope is sys or user)", text, i)
        name, after = _property_name(text, end + 1, keywords)
        return Token("prop", (word.lower(), name), i), after
    if word.upper() in keywords:
        return Token("kw", word.upper(), i), end
    return Token("name", word, i), end


def tokenize(text: str, keywords: frozenset[str] = FILTER_KEYWORDS) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c.isalpha():
            tok, i = _word(text, i, keywords)
        elif (c.isascii() and c.isdigit()) or c == ".":
            value, end = _number(text, i)
            tok, i = Token("num", value, i), end
        elif c == "'":
            value, end = _string(text, i)
            tok, i = Token("str", value, i), end
        elif c in '["':
            what = "delimited identifier [...]" if c == "[" else 'quoted identifier "..."'
            name, end = _enclosed(text, i, "]" if c == "[" else '"', what)
            tok, i = Token("prop", ("user", name), i), end
        elif c == "@" and i + 1 < len(text) and (text[i + 1].isalpha() or text[i + 1] == "_"):
            end = _regular(text, i + 1)
            tok, i = Token("param", text[i:end], i), end
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise SqlFilterError(f"unexpected character {c!r}", text, i)
            tok, i = Token("op", op, i), i + len(op)
        out.append(tok)
    out.append(Token("end", None, len(text)))
    return out
