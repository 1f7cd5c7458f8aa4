"""Measured figures in prose, told from specifications: what tests/project/test_figures.py reads.

A *figure* is a number with a unit: a duration (``s``, ``ms``, ``us``, ``seconds``, ``minutes``), a
size (``B``, ``KB``, ``KiB``, ``MB``, ``MiB``, ``GB``, ``GiB``, ``bytes``), a rate (``msg/s``,
``messages a second``), round trips (``RT``, ``round trips``), a percentage, or a ratio (``1.6x``,
``0.85 of the in-flight limit``, ``ratio 1.60``). Whether it was measured or is a specification
(a default, a limit Service Bus sets, a flag's value) is told so, in this order:

1. Code is not prose: fenced blocks and ``inline code`` are dropped first, so a flag
   (``--latency-ms 80``), a default in a signature (``max_in_flight=16``) or a line a command
   prints (``... in 5.16 s, 4 retries``) is never a figure of the page's own.
2. A figure set by the words right before it is a specification: *default*, *at most*, *up to*,
   *limit*, *maximum*, *timeout*, *deadline*, *every*, *target*, *simulated*, *documented*, ... (the
   three words before the number), or by the noun right after its unit: a ``5 s lock``, a
   ``30 s keep-alive``, a ``256 KB limit``, a ``70 ms round trip`` given to the emulator; and so is
   every figure of a sentence that cites documentation or quotas (Service Bus's, the SDK's).
3. Otherwise it is a measurement when it looks like one: a decimal (``0.45 s``, ``2.1 RT``), a
   range (``0.36-0.46 s``), a ratio or a rate (``996x``, ``12,132 msg/s``, ``0.13 of a full
   read``), or a whole number a measuring word comes right before (*took*, *about*, *~*,
   *measured*, *median*, *peak*, ...: ``took 10 s``, ``about 12 MiB``).
4. A whole number with neither is a specification: ``120 s``, ``1 minute``, ``5,000 connections``;
   so is a whole number of round trips (``2 round trips``: what a design costs, which tests count
   at the broker, not a time measured).

A measurement outside docs/benchmarks.md is allowed in a unit of text (a paragraph, a list item, a
table row) that links to a heading of docs/benchmarks.md: the figure's run, with its date, commit
and machine, is there."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_NUMBER = r"(?<![\w.^/-])(?P<num>\d[\d,]*(?:\.\d+)?)(?P<range>\s?(?:-|\u2013|to)\s?\d[\d,]*(?:\.\d+)?)?(?![\d.]\d)"
_UNIT = (
    r"(?:\s?(?P<unit>ms|us|µs|μs|s|seconds?|minutes?|min|hours?|h|KiB|MiB|GiB|KB|kB|MB|GB|B|bytes|"
    r"msg/s|messages/s|messages a second|RT|round trips?|%|percent)(?![\w/])"
    r"|(?P<times>x)(?![\w])"  # a ratio: 1.6x, 996x
    r"|\s(?P<of>of (?:a|an|the|its|one)\b))"  # a ratio: 0.85 of the in-flight limit
)
FIGURE = re.compile(_NUMBER + _UNIT)
RATIO_WORD = re.compile(r"\bratios?\s+(?:of\s+)?(?P<num>\d+\.\d+)")  # ratio 1.60

SETTING_BEFORE = re.compile(
    r"\b(?:defaults?|by default|at most|at least|up to|limit|limits|max|maximum|minimum|timeout|deadline|every|"
    r"target|targets|simulated|documented|set|sets|allowed|allows|quota|cap|within)\W*$",
    re.I,
)
SETTING_AFTER = re.compile(
    r"^\W{0,2}(?:locks?|lock duration|keep-alive|timeout|deadline|limit|cap|window|time to live|TTL|round trip\b|"
    r"latency|delay|sleeps?|intervals?|budget|by default|default)",
    re.I,
)
CITED = re.compile(r"\bdocument(?:s|ed|ation)\b|\bquotas?\b", re.I)  # what Service Bus or the SDK documents
MEASURING_BEFORE = re.compile(
    r"(?:\b(?:took|takes|take|taking|measured|median|mean|average|about|around|roughly|nearly|peak|peaked|"
    r"costs?|faster|slower)\W*|~\s*)$",
    re.I,
)


@dataclass(frozen=True)
class Figure:
    """A measurement found in a page: the text it is in, and the unit of text (for the message)."""

    page: str
    text: str
    unit: str


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (rule 1); HTML comments go too."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"`[^`]*?`", "`…`", text)  # inline code may run over a line break


def units(text: str) -> list[str]:
    """Paragraphs, list items and table rows: a link counts for the unit it is in."""
    found: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if lines and all(line.lstrip().startswith("|") for line in lines):
            found += lines  # a table: each row
            continue
        item: list[str] = []
        for line in lines:
            if re.match(r"\s{0,3}(?:[-*+]|\d+\.)\s", line) and item:
                found.append("\n".join(item))
                item = []
            item.append(line)
        if item:
            found.append("\n".join(item))
    return found


def _words_before(text: str, start: int, n: int = 3) -> str:
    """The last ``n`` words before ``start``, in the same sentence (or table cell)."""
    head = re.split(r"[.;:!?|(]\s|\|", text[:start])[-1]
    return " ".join(head.split()[-n:]) + (" " if head.endswith(" ") else "")


def _sentence(text: str, start: int, end: int) -> str:
    head = re.split(r"[.;!?]\s", text[:start])[-1]
    return head + text[start:end] + re.split(r"[.;!?]\s", text[end:])[0]


def measurements(text: str) -> list[str]:
    """The figures of one unit of prose that rules 2-4 call measurements."""
    found: list[str] = []
    for m in FIGURE.finditer(text):
        before = _words_before(text, m.start())
        cited = CITED.search(_sentence(text, m.start(), m.end()))
        if cited or SETTING_BEFORE.search(before) or SETTING_AFTER.match(text[m.end() :]):
            continue  # rule 2
        shaped = "." in m["num"] or m["range"] or m["times"] or m["of"] or (m["unit"] or "") in ("msg/s", "messages/s")
        if "." not in m["num"] and not m["range"] and (m["of"] or (m["unit"] or "").startswith(("RT", "round"))):
            continue  # "3 of the messages", "2 round trips": counts a design makes (tests count them at the broker)
        if shaped or MEASURING_BEFORE.search(before):
            found.append(m.group(0).strip())
    ratios = RATIO_WORD.finditer(text)
    found += [m.group(0) for m in ratios if not SETTING_BEFORE.search(_words_before(text, m.start()))]
    return found


def links_to_benchmarks(unit: str) -> bool:
    """The unit links to a heading of docs/benchmarks.md (``benchmarks.md#anchor``, from any page)."""
    return re.search(r"\]\((?:\.\./)*(?:docs/)?benchmarks\.md#[\w-]+\)", unit) is not None


def unlinked(page: str, text: str) -> list[Figure]:
    """The measurements of a page's prose in units that do not link to docs/benchmarks.md."""
    return [
        Figure(page, found, unit.strip()[:160])
        for unit in units(prose(text))
        if not links_to_benchmarks(unit)
        for found in measurements(unit)
    ]


def page_text(path: Path) -> str:
    """A page's text; a notebook's markdown cells (its code cells run and print what they measure)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return path.read_text(encoding="utf-8")


def pages() -> list[Path]:
    """Every page a reader meets but docs/benchmarks.md: README, the changelog, docs/*.md (the API
    reference's pages too) and the tutorials."""
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if p.name != "benchmarks.md"]
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *docs, *sorted((ROOT / "notebooks").glob("*.ipynb"))]
