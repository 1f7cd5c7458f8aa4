"""The docs keep up with the code: every magic and each of its options is in docs/magics.md, and
every relative link in README.md and docs/*.md points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sbnotebook.notebook import magics

ROOT = Path(__file__).resolve().parent.parent
PARSERS = magics.PARSERS
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def test_every_magic_is_found() -> None:
    names = {p.prog for p in PARSERS}
    registered = {f"%{name}" for name in magics.SbMagics.magics["line"]}
    assert names == registered and "%sb_browse" in names and "%sb_compose" in names


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.prog)
def test_every_magic_and_option_is_documented(parser: magics.Parser) -> None:
    text = (ROOT / "docs" / "magics.md").read_text(encoding="utf-8")
    name = parser.prog.lstrip("%")
    assert re.search(rf"%{name}\b", text), f"{parser.prog} is not in docs/magics.md"
    # Each option on a line that names the magic (its row in the table, or an example of it).
    lines = "\n".join(line for line in text.splitlines() if re.search(rf"%{name}\b", line))
    missing = [
        option
        for action in parser._actions
        for option in action.option_strings
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", lines)
    ]
    assert not missing, f"{parser.prog}: options {missing} are not on a line naming it in docs/magics.md"


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks are not links
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        file = target.split("#", 1)[0]
        if not (doc.parent / file).exists():
            broken.append(target)
    assert not broken, f"{doc.name}: links to missing files: {broken}"
