"""The Python blocks of README.md and docs/*.md run as tests (tests/doc_examples.py, Sybil): every block
is collected, at most one in ten is marked as one that cannot run here (with why), and a page whose
example calls a function by a name the code no longer has fails."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests import doc_examples

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^[ \t]*(```+)[ \t]*(\S*)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
INVISIBLE = re.compile(r"^[ \t]*<!--\s*invisible-code-block:\s*python.*?-->", re.S | re.M)  # as Sybil reads them
SKIP = re.compile(r"^[ \t]*<!--\s*skip:\s*next\s+(.*?)\s*-->", re.M)


def counts() -> tuple[int, int, list[str]]:
    """Python blocks shown, those marked as not run here, and why: checked against what Sybil collects
    (every fenced ``python`` block and invisible block holds an example Sybil evaluates)."""
    from sybil.evaluators.doctest import DocTestEvaluator

    sybil = doc_examples.make_sybil()
    blocks, reasons = 0, []
    for page in doc_examples.pages():
        text = page.read_text(encoding="utf-8")
        fences = list(FENCE.finditer(text))
        odd = [m[2] for m in fences if m[2] in ("py", "python3", "ipython", "pycon")]
        assert not odd, f"{page.name}: Python under another name escapes the examples: {odd}"
        spans = [m.span() for m in fences if m[2] == "python"] + [m.span() for m in INVISIBLE.finditer(text)]
        code = [
            e.region.start
            for e in sybil.parse(page).examples()
            if isinstance(e.region.evaluator, doc_examples.IPythonEvaluator | DocTestEvaluator)
        ]
        missed = [text.count("\n", 0, start) + 1 for start, end in spans if not any(start <= c < end for c in code)]
        assert not missed, f"{page.name}: the Python blocks at lines {missed} are not collected"
        assert not re.search(r"<!--\s*skip:\s*start", text), f"{page.name}: mark each block (skip: next), not a run"
        blocks += sum(1 for m in fences if m[2] == "python")
        reasons += SKIP.findall(text)
    return blocks, len(reasons), reasons


def test_every_python_block_is_collected_and_at_most_one_in_ten_is_marked() -> None:
    blocks, skipped, reasons = counts()
    assert blocks >= 50
    assert all(re.fullmatch(r'"[^"]{20,}"', r) for r in reasons), reasons  # each says why, in words
    assert skipped * 10 <= blocks, f"{skipped} of {blocks} blocks marked as not run here"


def test_a_renamed_function_fails_its_page(pytester: pytest.Pytester) -> None:
    """The collector on a page whose example uses a name the code does not have (a function renamed
    without its examples) fails; the same page with the right name passes."""
    page = textwrap.dedent(
        """\
        # A page

        ```python
        from sbnotebook import core
        core.send("orders", [{"order": 1}])
        ```

        ```python
        >>> core.counts("orders").active
        1
        ```
        """
    )
    pytester.makeconftest(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.doc_examples import make_sybil
        pytest_collect_file = make_sybil(patterns=("*.md",), path=__import__("pathlib").Path(__file__).parent).pytest()
        """
    )
    pytester.makefile(".md", right=page, renamed=page.replace("core.send(", "core.send_messages("))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n0", "right.md", "renamed.md")
    result.assert_outcomes(passed=2, failed=2)  # renamed.md: its send, and the count it shows
    result.stdout.fnmatch_lines(["*AttributeError: module 'sbnotebook.core' has no attribute 'send_messages'"])
