"""What the old-name tests share: docs/names.md's "Old names" table, and the FutureWarnings a test
hears (each old name said once per process: the 'said once' of core and of the emulator, which
keeps its own, forgotten while the test runs)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator

import pytest

from sbnotebook.core import renames
from sbnotebook.emulator import oldnames
from tests.project.test_names import OLD, codes

Said = Callable[[str], list[str]]


@pytest.fixture
def said() -> Iterator[Said]:
    """The FutureWarnings said while the test runs that name ``old``, with this process's 'said once'
    forgotten first (and given back after)."""
    saved = set(renames.WARNED), set(oldnames.WARNED)
    renames.WARNED.clear()
    oldnames.WARNED.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def lines(old: str) -> list[str]:
            return [str(w.message) for w in caught if issubclass(w.category, FutureWarning) and old in str(w.message)]

        yield lines
    for warned, before in ((renames.WARNED, saved[0]), (oldnames.WARNED, saved[1])):
        warned.clear()
        warned.update(before)


def once(said: Said, old: str, new: str) -> None:
    """``old`` was said exactly once, in one line naming ``new`` and the release that removes it."""
    lines = said(old)
    assert len(lines) == 1, f"{old}: said {len(lines)} times: {lines}"
    assert new in lines[0] and "\n" not in lines[0] and "0.3.0" in lines[0], lines[0]


def rows(kind: Callable[[list[str]], bool]) -> list[tuple[str, str, str]]:
    """(old, place, new) for each place of the old-names rows ``kind`` takes."""
    return [(row[0].strip("`"), place, row[2].strip("`")) for row in OLD if kind(row) for place in codes(row[1])]


def is_keyword(row: list[str]) -> bool:
    """A keyword of a Python function or class: the row's places are dotted names or classes."""
    places = codes(row[1])
    typed = re.fullmatch(r"`?[a-z_]+`?", row[0]) is not None
    return typed and bool(places) and all(re.match(r"(core|sbspark)\.|[A-Z]", p) for p in places)
