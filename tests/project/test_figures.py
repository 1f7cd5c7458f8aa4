"""Each measured figure is stated once, in docs/benchmarks.md, with its date, commit and machine;
every other page links to the run instead of restating it (how a measurement is told from a
specification: tests/project/figures.py). The last tests run each check on made-up pages and see
it fail."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.project.anchors import headings, slug
from tests.project.figures import ROOT, measurements, page_text, pages, prose, unlinked

BENCHMARKS = ROOT / "docs" / "benchmarks.md"
RUN = re.compile(r"^\*?Runs?[:*].*$", re.M)  # a section's "*Run:* DATE, commit C, machine M." line
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\b(?:commit|commits|at|base|branch)\s+`?([0-9a-f]{7,40})\b")


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_measured_figure_outside_the_benchmarks_links_to_its_run(page: Path) -> None:
    found = unlinked(str(page.relative_to(ROOT)), page_text(page))
    lines = "\n".join(f"  {f.text!r} in: {f.unit}" for f in found)
    assert not found, (
        f"{page.name} states measured figures without a link to their run in docs/benchmarks.md "
        f"(link the heading, benchmarks.md#..., in the same paragraph, or move the figure there):\n{lines}"
    )


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_to_the_benchmarks_finds_its_heading(page: Path) -> None:
    anchors = headings(BENCHMARKS)
    links = re.findall(r"\]\((?:\.\./)*(?:docs/)?benchmarks\.md#([\w-]+)\)", page_text(page))
    assert not [a for a in links if a not in anchors], f"{page.name}: no such heading in docs/benchmarks.md"


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each ``##`` and ``###`` section, the page's top before the first one."""
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.M)
    return [("(top)", parts[0]), *zip(parts[1::2], parts[2::2], strict=True)]


def machines(text: str) -> set[str]:
    section = dict(sections(text))["## Machines"]
    return set(re.findall(r"^\| `([\w-]+)` \|", section, re.M))


def unrun(text: str, known_commit: object = lambda c: True) -> list[str]:
    """Sections with measurements and no run line naming a date, a commit that exists and a machine
    of the Machines table (the summary table at the top has its runs in the sections it links)."""
    names = machines(text)
    wrong = []
    for heading, body in sections(text)[1:]:
        if not any(measurements(unit) for unit in prose(body).split("\n\n")):
            continue
        runs = RUN.findall(body)
        ok = [
            r
            for r in runs
            if DATE.search(r)
            and COMMIT.search(r)
            and all(known_commit(c) for c in COMMIT.findall(r))  # type: ignore[operator]
            and any(re.search(rf"`{re.escape(n)}`", r) for n in names)
        ]
        if not ok:
            wrong.append(heading)
    return wrong


def _in_history(commit: str) -> bool:
    if not (ROOT / ".git").exists():
        return True  # an unpacked sdist: no history to look in
    done = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    return done.returncode == 0


def test_every_run_in_the_benchmarks_says_its_date_commit_and_machine() -> None:
    wrong = unrun(BENCHMARKS.read_text(encoding="utf-8"), _in_history)
    assert not wrong, f"docs/benchmarks.md: sections with figures and no 'Run: DATE, commit C, machine M' line: {wrong}"


def summary_rows(text: str) -> list[list[str]]:
    top = sections(text)[0][1]
    return [[c.strip() for c in row.strip("|").split("|")] for row in top.splitlines() if row.startswith("| `")]


def unbacked(text: str) -> list[str]:
    """Summary rows whose result has no run in the body: each row links to the sections that hold
    its runs, and each decimal figure of its result is written in one of them."""
    by_anchor = {slug(heading): body for heading, body in reversed(sections(text)[1:])}
    wrong = []
    for row in summary_rows(text):
        result = " ".join(row[1:])
        linked = re.findall(r"\]\(#([\w-]+)\)", result)
        bodies = " ".join(by_anchor.get(a, "") for a in linked)
        numbers = re.findall(r"(?<![\w.])\d[\d,]*\.\d+", prose(row[2]))
        missing = [n for n in numbers if not re.search(rf"(?<![\w.]){re.escape(n)}(?![\d])", bodies)]
        if not linked or any(a not in by_anchor for a in linked) or missing:
            wrong.append(f"{row[0]}: links {linked}, figures not in them {missing}")
    return wrong


def test_every_summary_row_has_its_run_in_the_body() -> None:
    wrong = unbacked(BENCHMARKS.read_text(encoding="utf-8"))
    assert not wrong, f"docs/benchmarks.md's summary: rows without their run below: {wrong}"


# --- the checks, failing on made-up pages -----------------------------------------------------

MEASURED = [
    "A cold Tab offered the names in about 90 ms.",
    "At 80 ms a copy of 5,000 takes 1.9 s (2,600 messages a second).",
    "The ratio is 1.6x an export and an import.",
    "20 sessions took 0.36-0.46 s at 0 ms.",
    "A window costs 0.13 of a full read at 80 ms.",
    "Scan at 80 ms: ratio 1.60, target missed.",
    "A first peek is 2.1 RT.",
    "The kernel's peak was about 12 MiB.",
]
SPECIFIED = [
    "The lock lasts 1 minute by default, at most 5 minutes.",
    "A batch is refused over the 256 KB limit Service Bus sets.",
    "The emulator runs with `--latency-ms 80` and `max_in_flight=16`.",
    "The sends' timeout is 120 s; a connection has 30 s to open.",
    "Polls every 1 s, a 5 s lock, Service Bus's documented 70 ms round trip.",
    "Service Bus's documentation describes a 70 ms round trip plus about 10 ms to store a message.",
    "A first peek on a new entity costs 2 round trips (attach, call).",
    "The command prints `send orders: 2 failed of 2 in 5.16 s, 4 retries`.",
    "Copies of 1 KB messages, 10^4 of them, 3 of the messages left.",
    "```text\nchaos soak (212 s, seed 1)\n```",
]


@pytest.mark.parametrize("sentence", MEASURED)
def test_a_measurement_on_a_made_up_page_asks_for_its_link(sentence: str) -> None:
    assert unlinked("made-up.md", sentence), f"not taken for a measurement: {sentence!r}"
    linked = f"{sentence} ([the run](benchmarks.md#interactive-latency-one-live-connection))"
    assert not unlinked("made-up.md", linked), "a link to the run in the same paragraph is enough"
    apart = f"{sentence}\n\nSee [the run](benchmarks.md#interactive-latency-one-live-connection)."
    assert unlinked("made-up.md", apart), "a link in another paragraph is not"


@pytest.mark.parametrize("sentence", SPECIFIED)
def test_a_specification_on_a_made_up_page_is_not_a_measurement(sentence: str) -> None:
    assert not unlinked("made-up.md", sentence), f"a specification taken for a measurement: {sentence!r}"


def test_the_run_checks_fail_on_a_made_up_benchmarks_page() -> None:
    head = "# Benchmarks\n\n| `x.py` | what | **1.25x** ([run](#the-run)) | `python x.py` |\n\n"
    head += "## Machines\n\n| machine | what |\n|---|---|\n| `box` | 2 cores |\n\n"
    good = head + "## The run\n\nRun: 2026-11-27, commit abc1234, machine `box`.\n\nThe copy took 1.25x.\n"
    assert unrun(good) == [] and unbacked(good) == []
    assert unrun(good.replace("Run: 2026-11-27, ", "Run: ")) == ["## The run"]  # no date
    assert unrun(good.replace("machine `box`", "machine `other`")) == ["## The run"]
    assert unrun(good, known_commit=lambda c: False) == ["## The run"]  # a commit not in the history
    assert unbacked(good.replace("1.25x.\n", "1.3x.\n")), "a summary figure the run does not state"
    assert unbacked(good.replace("([run](#the-run))", "")), "a summary row without its run"
