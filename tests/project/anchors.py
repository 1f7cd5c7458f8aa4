"""The anchors of a page's headings, as the docs site makes them: what links to ``page.md#anchor``
must find (tests/project/test_docs.py, and test_figures.py for the links to docs/benchmarks.md)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path


def slug(heading: str) -> str:
    """A heading's anchor, as Python-Markdown's toc makes it (``## Cold paths (issue 31)``:
    ``cold-paths-issue-31``)."""
    plain = unicodedata.normalize("NFKD", heading.lstrip("#").strip()).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", plain).strip().lower())


def headings(path: Path) -> set[str]:
    """The anchors of a page's headings, as the docs site makes them (a repeated heading gets _1,
    _2, ...)."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    found: set[str] = set()
    for heading in re.findall(r"^#+\s+(.*?)\s*#*$", text, re.M):
        slug_ = slug(heading)
        n = 0
        while (f"{slug_}_{n}" if n else slug_) in found:
            n += 1
        found.add(f"{slug_}_{n}" if n else slug_)
    return found
