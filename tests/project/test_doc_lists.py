"""The docs' lists, held to the tree and the code (issue 72, point 5): lists drift where prose does not,
so each is read here from the page and compared with what it lists.

- README.md's tutorial list: every notebook of notebooks/, in order, each by its own title.
- README.md's test mirror ("Layout"): the folders it says tests/, tests/core/ and tests/emulator/ hold
  are the test packages there, and those of core/ and emulator/ are sub-packages of the package.
- docs/magics.md's table of commands: a row for every registered magic (``%%name`` for a cell magic),
  and no row for one that is not (tests/project/test_docs.py checks each option is on a line naming
  its magic; this checks the table itself).
- The purge's requests in flight, where a page states them: the figure of ``DELETES_IN_FLIGHT``.
- CHANGELOG.md's Unreleased section: each fact that once read two ways there (the copy's bound,
  Spark's epoch times, a signed age such as ``-1h``, the SQL module's home) is said in one bullet
  only. That a later line does not contradict an earlier one cannot be read by a test in general;
  one bullet per fact leaves nothing for these four to contradict.
- Install lines (README.md, CHANGELOG.md, docs/, the tutorials): none installs sbnotebook from a
  package index by its bare name, which the index does not have (a checkout or the wheel, as
  ``sbnotebook.about.Install.requirement`` says it for a hint).

(docs/core.md's Defaults table: tests/project/test_defaults.py, beside the other checks of the
defaults.)

Each rule is a function of the text it reads, so each has a test on a small broken input."""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path

from sbnotebook.notebook import magics

ROOT = Path(__file__).resolve().parents[2]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --- README's tutorial list --------------------------------------------------------------------------

TUTORIAL = re.compile(r"^- \[(?P<title>[^\]]+)\]\(notebooks/(?P<file>[^)]+\.ipynb)\)$")


def notebook_titles(folder: Path) -> dict[str, str]:
    """Each notebook of ``folder`` in file order, with its title (its first cell's first heading)."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        source = "".join(json.loads(_read(path))["cells"][0]["source"])
        found[path.name] = source.splitlines()[0].removeprefix("# ").strip()
    return found


def readme_tutorials(readme: str) -> list[str]:
    """The bullets of README's tutorial list: those right after the paragraph that opens "Tutorials"
    (none when the paragraph is not followed by a list)."""
    lines = readme.split("\nTutorials", 1)[1].splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if not line.strip()), len(lines))
    bullets = []
    for line in lines[start:]:
        if not line.startswith("- "):
            break
        bullets.append(line)
    return bullets


def wrong_tutorial_list(readme: str, notebooks: Mapping[str, str]) -> list[str]:
    """README's tutorial list against ``notebooks`` (file -> title, in order): the same files in the
    same order, each bullet a link to its notebook under the notebook's own title."""
    found, listed = [], []
    for bullet in readme_tutorials(readme):
        match = TUTORIAL.match(bullet)
        if match is None:
            found.append(f"README's tutorial list: not a link to a notebook: {bullet!r}")
            continue
        listed.append(match["file"])
        title = notebooks.get(match["file"])
        if title is not None and title != match["title"]:
            found.append(f"README names {match['file']} {match['title']!r}; its title is {title!r}")
    if listed != list(notebooks):
        found.append(f"README's tutorials are {listed}; notebooks/ holds {list(notebooks)}")
    return found


def test_readme_lists_every_tutorial_in_order() -> None:
    notebooks = notebook_titles(ROOT / "notebooks")
    assert len(notebooks) >= 12  # the folder was read
    assert wrong_tutorial_list(_read(ROOT / "README.md"), notebooks) == []


def test_the_tutorial_list_check_can_fail() -> None:
    notebooks = {"00_tour.ipynb": "A tour", "01_quickstart.ipynb": "Quickstart", "02_more.ipynb": "More"}
    readme = "Intro.\n\nTutorials, in `notebooks/`:\n\n- [A tour](notebooks/00_tour.ipynb)\n{}\nDocs: ...\n"
    whole = "- [Quickstart](notebooks/01_quickstart.ipynb)\n- [More](notebooks/02_more.ipynb)\n"
    assert wrong_tutorial_list(readme.format(whole), notebooks) == []
    stops_early = readme.format("- [Quickstart](notebooks/01_quickstart.ipynb)\n")
    assert wrong_tutorial_list(stops_early, notebooks) == [
        "README's tutorials are ['00_tour.ipynb', '01_quickstart.ipynb']; notebooks/ holds "
        "['00_tour.ipynb', '01_quickstart.ipynb', '02_more.ipynb']"
    ]
    swapped = readme.format("- [More](notebooks/02_more.ipynb)\n- [Quickstart](notebooks/01_quickstart.ipynb)\n")
    assert len(wrong_tutorial_list(swapped, notebooks)) == 1
    renamed = readme.format(whole.replace("[More]", "[Less]"))
    assert wrong_tutorial_list(renamed, notebooks) == ["README names 02_more.ipynb 'Less'; its title is 'More'"]
    as_a_range = "\nTutorials: `notebooks/00_tour.ipynb` to `02_more.ipynb`. Docs: ...\n\n## Next\n\n- a list\n"
    assert wrong_tutorial_list(as_a_range, notebooks) == [
        "README's tutorials are []; notebooks/ holds ['00_tour.ipynb', '01_quickstart.ipynb', '02_more.ipynb']"
    ]
    not_a_link = readme.format("- `notebooks/01_quickstart.ipynb`\n- [More](notebooks/02_more.ipynb)\n")
    assert wrong_tutorial_list(not_a_link, notebooks)[0].startswith("README's tutorial list: not a link")


# --- README's test mirror ----------------------------------------------------------------------------

FOLDER = re.compile(r"`(\w+)/`")


def mirror_lists(readme: str) -> dict[str, list[str]]:
    """The folders README's "Layout" says each folder of tests holds: ``tests`` (from "`tests/` mirrors
    the package:" to the shared fixtures), ``tests/core`` and ``tests/emulator`` (the parentheses after
    "`tests/<part>/<part>/` mirrors `sbnotebook/<part>/<part>/`")."""
    readme = re.sub(r"\s+", " ", readme)  # a sentence may wrap anywhere
    top = readme.split("`tests/` mirrors the package:", 1)[1].split("Shared fixtures", 1)[0]
    lists = {"tests": FOLDER.findall(top)}
    for part in ("core", "emulator"):
        after = readme.split(f"`tests/{part}/<part>/` mirrors `sbnotebook/{part}/<part>/` (", 1)[1]
        lists[f"tests/{part}"] = FOLDER.findall(after.split(")", 1)[0])
    return lists


def suite_packages(folder: Path) -> set[str]:
    """The sub-folders of ``folder`` that are packages of the suite (node's js/ and caches are not)."""
    return {p.parent.name for p in folder.glob("*/__init__.py")}


def wrong_mirror(readme: str, root: Path) -> list[str]:
    """README's lists against the tree: each the test packages of its folder, none twice, and each
    folder of tests/core/ and tests/emulator/ one of the package's own sub-packages."""
    found = []
    for folder, listed in mirror_lists(readme).items():
        there = suite_packages(root / folder)
        found += [f"README names {folder}/{n}/ twice" for n in sorted({n for n in listed if listed.count(n) > 1})]
        found += [f"README names {folder}/{n}/, which is not there" for n in sorted(set(listed) - there)]
        found += [f"README's list of {folder}/ leaves out {n}/" for n in sorted(there - set(listed))]
        if folder != "tests":
            package = root / "sbnotebook" / folder.removeprefix("tests/")
            found += [
                f"{folder}/{n}/ mirrors no sub-package of {package.relative_to(root)}/"
                for n in sorted(there)
                if not (package / n / "__init__.py").is_file()
            ]
    return found


def test_readme_names_the_folders_tests_holds() -> None:
    lists = mirror_lists(_read(ROOT / "README.md"))
    assert all(len(listed) > 5 for listed in lists.values()), lists  # the lists were found
    assert wrong_mirror(_read(ROOT / "README.md"), ROOT) == []


def test_the_mirror_check_can_fail(tmp_path: Path) -> None:
    packages = ("tests/core", "tests/emulator", "tests/core/a", "tests/emulator/b", "tests/emulator/journey")
    for folder in (*packages, "sbnotebook/core/a"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "tests" / "emulator" / "js").mkdir()  # no __init__.py: not a test package
    readme = (
        "`tests/` mirrors the package: `core/`, `emulator/`, `sql/`. Shared fixtures are ...\n"
        "`tests/core/<part>/` mirrors `sbnotebook/core/<part>/` (`a/`, `a/`) and\n"
        "`tests/emulator/<part>/` mirrors `sbnotebook/emulator/<part>/` (`b/`, `sql/`): ...\n"
    )
    assert wrong_mirror(readme, tmp_path) == [
        "README names tests/sql/, which is not there",
        "README names tests/core/a/ twice",
        "README names tests/emulator/sql/, which is not there",
        "README's list of tests/emulator/ leaves out journey/",
        "tests/emulator/b/ mirrors no sub-package of sbnotebook/emulator/",
        "tests/emulator/journey/ mirrors no sub-package of sbnotebook/emulator/",
    ]


# --- docs/magics.md's table of commands ----------------------------------------------------------------

CELL = re.compile(r"(?<!\\)\|")  # a table's cell border; ``\|`` is a | inside a cell


def table_commands(text: str) -> list[str]:
    """The commands each row of docs/magics.md's first table names in its first cell (``%sb_peek``,
    ``%%sb_send``): the first word of each code span there."""
    lines = text.split("\n| Command |", 1)[1].splitlines()[2:]
    rows = lines[: next((i for i, x in enumerate(lines) if not x.startswith("|")), len(lines))]
    return [m for row in rows for m in re.findall(r"`(%%?sb_\w+)", CELL.split(row)[1])]


def wrong_magics_table(text: str, line: set[str], cell: set[str]) -> list[str]:
    """The table against the registered magics: a row naming each (its cell form ``%%name`` for a cell
    magic), and none naming a magic that is not registered."""
    named = table_commands(text)
    rows = {m.lstrip("%") for m in named}
    found = [f"docs/magics.md's table has no row for %{n}" for n in sorted((line | cell) - rows)]
    found += [f"docs/magics.md's table has a row for %{n}, no such magic" for n in sorted(rows - line - cell)]
    found += [f"docs/magics.md's table does not show %%{n}" for n in sorted(cell - {m[2:] for m in named})]
    return found


def test_every_registered_magic_has_a_row_in_the_table() -> None:
    registered = magics.SbMagics.magics
    line, cell = set(registered["line"]), set(registered["cell"])
    assert "sb_route" in line and "sb_send" in cell  # the registry was read
    assert wrong_magics_table(_read(ROOT / "docs" / "magics.md"), line, cell) == []


def test_the_magics_table_check_can_fail() -> None:
    text = (
        "# Magics\n\n| Command | What it does | Returns |\n|---|---|---|\n"
        "| `%sb_peek ENTITY [--mode a\\|b]` | look | DataFrame |\n"
        "| `%sb_send ENTITY` | send a line | `Report` |\n"
        "| `%sb_gone ENTITY` | what was | - |\n\n"
        "`%sb_route orders` in prose is not a row.\n"
    )
    assert table_commands(text) == ["%sb_peek", "%sb_send", "%sb_gone"]
    assert wrong_magics_table(text, {"sb_peek", "sb_send", "sb_route"}, {"sb_send"}) == [
        "docs/magics.md's table has no row for %sb_route",
        "docs/magics.md's table has a row for %sb_gone, no such magic",
        "docs/magics.md's table does not show %%sb_send",
    ]


# --- the purge's requests in flight ------------------------------------------------------------------

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "eight": 8, "ten": 10, "sixteen": 16}
IN_FLIGHT = re.compile(r"\b(\w+)\s+(?:requests\s+)?in\s+flight\s+\(`DELETES_IN_FLIGHT`\)")


def constant(root: Path, name: str) -> int:
    """The one module-level ``name = <int>`` of sbnotebook/core, wherever its module lives."""
    found = [
        node.value.value
        for path in sorted((root / "sbnotebook" / "core").rglob("*.py"))
        for node in ast.parse(_read(path)).body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == [name]
        and isinstance(node.value, ast.Constant)
        and type(node.value.value) is int
    ]
    assert len(found) == 1, f"{name}: {len(found)} declarations in sbnotebook/core"
    return int(found[0])


def wrong_deletes_in_flight(pages: Mapping[str, str], figure: int) -> list[str]:
    """Each page states the figure by the constant's name (``16 in flight (`DELETES_IN_FLIGHT`)``),
    and the figure is the constant's."""
    found = []
    for page, text in pages.items():
        said = IN_FLIGHT.findall(text)
        if not said:
            found.append(f"{page} says no figure of `DELETES_IN_FLIGHT`")
        for word in said:
            value = int(word) if word.isdigit() else WORDS.get(word.lower())
            if value != figure:
                found.append(f"{page} says {word} in flight; DELETES_IN_FLIGHT is {figure}")
    return found


def test_the_pages_say_the_purges_requests_in_flight_as_the_code_does() -> None:
    pages = {f"docs/{name}": _read(ROOT / "docs" / name) for name in ("magics.md", "core.md")}
    assert wrong_deletes_in_flight(pages, constant(ROOT, "DELETES_IN_FLIGHT")) == []


def test_the_in_flight_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "sbnotebook" / "core" / "incidents" / "purge" / "on_server.py"
    module.parent.mkdir(parents=True)
    module.write_text("DELETES_IN_FLIGHT = 16\nOTHER = 4\n", encoding="utf-8")
    assert constant(tmp_path, "DELETES_IN_FLIGHT") == 16
    pages = {
        "magics.md": "batch delete (4,000 a request, four in flight (`DELETES_IN_FLIGHT`), ...)",
        "core.md": "16 requests\nin flight (`DELETES_IN_FLIGHT`)",
        "other.md": "four in flight",
    }
    assert wrong_deletes_in_flight(pages, 16) == [
        "magics.md says four in flight; DELETES_IN_FLIGHT is 16",
        "other.md says no figure of `DELETES_IN_FLIGHT`",
    ]


# --- CHANGELOG's Unreleased section ------------------------------------------------------------------

# Each fact that read two ways in the section, and what finds a bullet saying it (issue 72).
FACTS = {
    "the copy's bound": r"max_held_bytes|MAX_HELD_BYTES|two pages|peak_held",
    "Spark's epoch times": r"\bepoch\b",
    "a signed age (-1h)": r"(?<![\w-])-\d+[smhd]\b",
    "the SQL module's home": r"\bsbnotebook\.(?:emulator\.)?sql\w*",
}


def _bullets(section: str) -> list[str]:
    bullets: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            bullets.append(line[2:])
        elif bullets and line.startswith("  "):
            bullets[-1] += " " + line.strip()
        elif line.strip():
            bullets.append("")  # a heading or a paragraph ends a bullet
    return [b for b in bullets if b]


def unreleased_bullets(changelog: str) -> list[str]:
    """The bullets of the newest section that has any (Unreleased; once a release is cut and the new
    Unreleased is still empty, that release's), each with its continuation lines."""
    sections = [_bullets(s.split("\n", 1)[-1]) for s in changelog.split("\n## ")[1:]]
    return next((bullets for bullets in sections if bullets), [])


def facts_said_twice(changelog: str, facts: Mapping[str, str]) -> list[str]:
    found = []
    for fact, pattern in facts.items():
        saying = [b for b in unreleased_bullets(changelog) if re.search(pattern, b)]
        if len(saying) > 1:
            found.append(f"{fact}: said in {len(saying)} bullets: " + " / ".join(b[:60] for b in saying))
    return found


def test_each_fact_of_the_unreleased_section_is_said_once() -> None:
    changelog = _read(ROOT / "CHANGELOG.md")
    assert len(unreleased_bullets(changelog)) > 10  # the section was read
    assert facts_said_twice(changelog, FACTS) == []


def test_the_changelog_check_can_fail() -> None:
    changelog = (
        "# Changelog\n\n## Unreleased (0.2.0)\n\n### Added\n"
        "- Spark reads take `enqueuedAfter` (ISO 8601 or epoch\n  seconds).\n"
        "- `%sb_sessions --updated-after=-1h` needs the `=`.\n"
        "### Changed\n"
        "- One time grammar: `-2h` is refused; seconds since the epoch are taken nowhere.\n\n"
        "## 0.1.0\n\n- epoch, before the release: not this section's.\n"
    )
    cut = changelog.replace("## Unreleased (0.2.0)\n\n### Added", "## Unreleased (0.3.0)\n\n## 0.2.0\n\n### Added")
    assert unreleased_bullets(cut) == unreleased_bullets(changelog)  # a new, empty Unreleased: the release's
    assert unreleased_bullets(changelog)[0] == "Spark reads take `enqueuedAfter` (ISO 8601 or epoch seconds)."
    assert [f.split(":")[0] for f in facts_said_twice(changelog, FACTS)] == [
        "Spark's epoch times",
        "a signed age (-1h)",
    ]


# --- install lines -----------------------------------------------------------------------------------


def _code(text: str) -> Iterator[str]:
    """Each line of each fenced block, then each inline code span (one may wrap a line)."""
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S):
        yield from block.splitlines()
    outside = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    yield from (span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", outside))


def _page_text(path: Path) -> str:
    """A page as markdown: a notebook's markdown cells as they are, its code cells as fenced blocks."""
    if path.suffix != ".ipynb":
        return _read(path)
    cells = json.loads(_read(path))["cells"]
    return "\n\n".join(
        "".join(c["source"]) if c["cell_type"] == "markdown" else "```\n" + "".join(c["source"]) + "\n```"
        for c in cells
    )


BY_NAME = re.compile(r"sbnotebook(\[[^\]]*\])?([=<>!~]=?\S*)?")  # sbnotebook, sbnotebook[x], sbnotebook==0.2


def index_installs(text: str) -> list[str]:
    """The install commands of ``text``'s code that name the kit by its bare name (from an index)."""
    found = []
    for code in _code(text):
        for command in re.findall(r"pip install\b([^#;&|]*)", code):
            try:
                words = shlex.split(command)
            except ValueError:  # a quote the span cut
                words = command.split()
            if any(BY_NAME.fullmatch(w.strip("'\"")) for w in words):
                found.append(re.sub(r"\s+", " ", f"pip install{command}").strip())
    return found


def doc_pages() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return pages + sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_no_install_line_installs_the_kit_from_an_index() -> None:
    pages = doc_pages()
    assert sum("pip install" in _page_text(p) for p in pages) > 5  # the pages were read
    found = {str(p.relative_to(ROOT)): index_installs(_page_text(p)) for p in pages}
    assert {page: lines for page, lines in found.items() if lines} == {}


def test_the_install_check_can_fail(tmp_path: Path) -> None:
    page = (
        "```bash\npip install 'sbnotebook[tracing]'   # from the index\n"
        "pip install -e '.[tracing]' && pip install 'dist/sbnotebook-0.2.0-py3-none-any.whl[tracing]'\n```\n\n"
        "Once published, `%pip install\n'sbnotebook[databricks]'`; `pip install -U sbnotebook==0.2.0 pytest`;\n"
        "`pip install -e path/to/sbnotebook`; in prose, pip install sbnotebook is no command.\n"
    )
    assert index_installs(page) == [
        "pip install 'sbnotebook[tracing]'",
        "pip install 'sbnotebook[databricks]'",
        "pip install -U sbnotebook==0.2.0 pytest",
    ]
    notebook = tmp_path / "00_x.ipynb"
    cells = [{"cell_type": "markdown", "source": ["# X"]}, {"cell_type": "code", "source": ["%pip install sbnotebook"]}]
    notebook.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert index_installs(_page_text(notebook)) == ["pip install sbnotebook"]
