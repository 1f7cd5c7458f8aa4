"""Dead-letter signatures: a message's dead-letter reason and description with their variable parts
masked, so that ``Order 48213 failed after 312 ms`` and ``Order 50117 failed after 97 ms`` are one
group, ``Order <NUM> failed after <NUM> ms``.

The approach is log template mining's first step (drain3's masking: an ordered list of patterns,
each replaced by a named placeholder), without its second (Drain's clustering of masked lines into
templates that generalise as lines arrive). A signature must be a function of the message alone:
``--where 'signature == "..."'`` has to select in a later scan exactly the messages a count put in
that group, and Drain's templates depend on the order and number of lines seen before. So the kit
masks and groups by the masked text; one pass of one combined pattern (a leftmost match wins; at one
position the first alternative that matches wins, in the order of ``MASKS``).

What is masked, in this order:

=========  ==========================================================  ======================
mask       what                                                        example
=========  ==========================================================  ======================
URL parts  the variable segments of a URL: path segments with a       ``https://api.contoso.com/orders/<*>?id=<*>``
           digit or longer than 24 characters, query values, fragment
<EMAIL>    e-mail addresses                                            ``<EMAIL>``
<TIME>     ISO 8601 dates and times, .NET's ``11/26/2026 08:33:49``,  ``<TIME>``
           clock times
<GUID>     GUIDs (with or without braces)                              ``<GUID>``
'<*>'      quoted values ('...' and "..."; an apostrophe in a word    ``customer '<*>' unknown``
           is not a quote)
<IP>       IPv4 addresses (with a port)                                ``<IP>``
<HEX>      0x... and hex strings of 8 or more with a letter a-f       ``<HEX>``
<ID>       tokens mixing letters and digits at least twice           ``<ID>`` (``ord8f3k2L9``)
<NUM>      numbers (a sign when it is not a hyphen), decimals          ``<NUM>``
=========  ==========================================================  ======================

Runs of whitespace become one space and a signature keeps at most ``MAX_LENGTH`` characters (stack
traces in descriptions): what is kept per group stays small.
"""

from __future__ import annotations

import re
from typing import Any

MAX_LENGTH = 300  # characters of a signature kept (a stack trace in a description is not a template)
MAX_INPUT = 1_000  # characters read: masking only shortens, so the rest would be cut anyway

_ALNUM = "A-Za-z0-9"
# Quoted values first, over the whole text (they may hold spaces); a quote after a letter is an
# apostrophe. Each pattern starts with the character it needs, so the search skips the rest fast.
QUOTED = re.compile(r"'(?<![A-Za-z0-9]')[^'\n]{1,200}'(?![A-Za-z0-9])|\"[^\"\n]{0,200}\"")
_URL = r"(?P<url>[A-Za-z][A-Za-z0-9+.-]{1,15}://\S+)"
_EMAIL = r"(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
_TIME = (
    r"(?P<time>\d{4}-\d{2}-\d{2}(?:T\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}/\d{1,2}/\d{4}|(?<![\d:])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?Z?)"
)
_GUID = r"(?P<guid>[{(]?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}[})]?)"
_IP = r"(?P<ip>(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\d.]))"
_HEX = (
    rf"(?P<hex>(?<![{_ALNUM}])(?:0[xX][0-9A-Fa-f]+"
    rf"|(?=[0-9A-Fa-f]*[A-Fa-f])[0-9A-Fa-f]{{8,}})(?![{_ALNUM}]))"
)
_ID = (
    rf"(?P<id>(?<![{_ALNUM}])(?=[{_ALNUM}]*(?:[A-Za-z][0-9]+[A-Za-z]|[0-9][A-Za-z]+[0-9]))"
    rf"[{_ALNUM}]+(?![{_ALNUM}]))"
)
_NUM = r"(?P<num>(?:(?<![A-Za-z0-9.])[-+])?\d+(?:[.,]\d+)*)"
# The rest, applied to each word that holds a digit, an @, :// or 8 letters a-f in a row (most words
# hold none: they are kept without running the pattern, which tries every alternative everywhere).
_ORDER = [_URL, _EMAIL, _TIME, _GUID, _IP, _HEX, _ID, _NUM]
MASKS = re.compile("|".join(_ORDER))
# The same without the URL and e-mail alternatives, for the words that hold neither "://" nor "@"
# (most): those two would otherwise be tried, and fail, at every position of every word.
_PLAIN = re.compile("|".join(p for p in _ORDER if p not in (_URL, _EMAIL)))
_VARIABLE = re.compile(r"[0-9@]|://|[A-Fa-f]{8}")  # a digit, an address, or letters that may be hex
_URL_TAIL = ".,;:!?)]}"  # punctuation that ends a sentence, not the URL
_FIXED = {"email": "<EMAIL>", "time": "<TIME>", "guid": "<GUID>", "ip": "<IP>", "hex": "<HEX>", "id": "<ID>"}


def _segment(part: str) -> str:
    """A URL path segment: kept when it reads as a word (``orders``), masked when it varies."""
    if not part or (len(part) <= 24 and not any(c.isdigit() for c in part)):
        return part
    return "<*>"


_URL_PARTS = re.compile(r"([^:]+)://(?:[^@/?#]*@)?([^/?#:]*)(?::(\d+))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)


def _url(text: str) -> str:
    tail = ""
    while text and text[-1] in _URL_TAIL:
        text, tail = text[:-1], text[-1] + tail
    parts = _URL_PARTS.fullmatch(text)
    if parts is None:  # not the shape of an address: masked whole rather than leave its ids
        return "<URL>" + tail
    scheme, host, port, path, query, fragment = parts.groups()
    # A host can carry numbers and ids too (pods, IPs): masked as text is. User info is dropped.
    out = f"{scheme}://{mask(host)}{f':{port}' if port else ''}"
    out += "/".join(_segment(p) for p in path.split("/"))
    if query:
        pairs = (p.split("=", 1) for p in query.split("&"))
        out += "?" + "&".join(f"{p[0]}=<*>" if len(p) == 2 else "<*>" for p in pairs)
    if fragment:
        out += "#<*>"
    return out + tail


def _quoted(m: re.Match[str]) -> str:
    quote = m.group()[0]
    return f"{quote}<*>{quote}"


def _replace(m: re.Match[str]) -> str:
    kind = m.lastgroup
    if kind == "num":
        return "<NUM>"
    if kind == "url":
        return _url(m.group())
    return _FIXED[kind or "num"]


_DIGITS = str.maketrans("123456789", "000000000")
_DIGIT = re.compile(r"\d")
_CACHE: dict[str, str] = {}  # masked texts by their digits-as-zeros form (a few hundred KB at most)
CACHE_SIZE = 1024


def mask(text: str) -> str:
    """``text`` with its variable parts replaced by placeholders (see the module docstring).

    Every pattern treats the ten digits alike, so texts that differ only in their digits (an order
    number, milliseconds: most descriptions of one kind) mask alike, unless a digit survives into
    the result (a URL's port): the result is remembered under the text with its digits as zeros,
    and most descriptions cost one ``str.translate`` and a lookup."""
    text = text[:MAX_INPUT]
    key = text.translate(_DIGITS)
    found = _CACHE.get(key)
    if found is not None:
        return found
    masked = _mask(text)
    if _DIGIT.search(masked) is None:
        if len(_CACHE) >= CACHE_SIZE:
            _CACHE.clear()  # bounded: start again rather than keep an LRU order per call
        _CACHE[key] = masked
    return masked


def _mask(text: str) -> str:
    words = QUOTED.sub(_quoted, text).split() if ("'" in text or '"' in text) else text.split()
    for i, word in enumerate(words):
        # Most words are letters only, and a number alone is common: neither needs the pattern.
        if word.isalpha() and len(word) < 8:
            continue
        if word.isdigit():
            words[i] = "<NUM>"
        elif _VARIABLE.search(word):
            masks = MASKS if ("@" in word or "://" in word) else _PLAIN
            words[i] = masks.sub(_replace, word)
    masked = " ".join(words)
    return masked if len(masked) <= MAX_LENGTH else masked[: MAX_LENGTH - 1] + "…"


def signature(record: dict[str, Any]) -> str | None:
    """The dead-letter signature of a record: ``reason: description``, masked; None when the
    message has neither."""
    reason = record.get("dead_letter_reason") or ""
    description = record.get("dead_letter_error_description") or ""
    if not reason and not description:
        return None
    return mask(f"{reason}: {description}" if reason and description else reason or description)
