"""A public API you can hold in your head: every name in ``core.__all__`` is used by the layers above
(the notebook, Spark, the pytest plugin, the command line: any module of the package outside
``core/``) or is meant for users and named in docs/. A name that is neither is private (issue 52)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from sbnotebook import core
from tests.helpers import names_in

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sbnotebook"


def used_in(files: Iterable[Path]) -> set[str]:
    """The names code mentions: names, attributes, imported names (not words in strings)."""
    return {name for path in files for name in names_in(ast.parse(path.read_text(encoding="utf-8")))}


def named_in(pages: Iterable[Path]) -> set[str]:
    """Every word of the pages: a name is documented when a page says it. Not docs/names.md's "Old
    names", which lists the names that left the API (saying so documents nothing)."""
    words: set[str] = set()
    for page in pages:
        text = page.read_text(encoding="utf-8").split("\n## Old names\n")[0]
        words.update(re.findall(r"\w+", text))
    return words


def unused_and_undocumented(public: Iterable[str], used: set[str], documented: set[str]) -> list[str]:
    return sorted(name for name in public if name not in used and name not in documented)


def test_every_public_core_name_is_used_above_or_documented() -> None:
    above = [p for p in PACKAGE.rglob("*.py") if PACKAGE / "core" not in p.parents]
    assert len(above) > 50  # the notebook, Spark, testing, the emulator, the command line
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert len(pages) > 10
    assert unused_and_undocumented(core.__all__, used_in(above), named_in(pages)) == []


def test_the_check_finds_a_public_name_nobody_uses_or_reads_about(tmp_path: Path) -> None:
    code = tmp_path / "above.py"
    code.write_text("from sbnotebook.core import peek\ncore.send('q', [])\n")
    page = tmp_path / "page.md"
    page.write_text("Use `core.receive` to take messages.\n")
    found = unused_and_undocumented(
        ["peek", "send", "receive", "parse_connection_string"], used_in([code]), named_in([page])
    )
    assert found == ["parse_connection_string"]
