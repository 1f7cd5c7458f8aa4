"""The docs keep up with the code: every magic and each of its options is in docs/magics.md, so is
every setting with its default, and every relative link in README.md and docs/*.md points at a
file that exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.notebook import magics
from sbnotebook.notebook.magics.settings import RENAMED_SETTINGS
from tests.project.anchors import headings as _headings

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_settings_table_is_every_setting_with_its_default() -> None:
    """docs/magics.md's Settings table against the traits (settings.py): a row for each setting but
    the old names, and each row's default the trait's: a value, or the core constant it starts from
    (``core.MAX_IN_FLIGHT``), whose value it must be."""
    text = (ROOT / "docs" / "magics.md").read_text(encoding="utf-8")
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in row.strip("|").split("|")] for row in section.splitlines() if row.startswith("| `")]
    documented = {row[0].strip("`"): row[1].strip("`") for row in rows}
    traits = {n: t for n, t in magics.SbMagics.class_traits(config=True).items() if n not in RENAMED_SETTINGS}
    assert set(documented) == set(traits)
    for name, trait in traits.items():
        default, said = trait.default_value, documented[name]
        if said.startswith("core."):
            said = str(getattr(core, said.removeprefix("core.")))  # an AttributeError: no such constant
        same = float(said) == default if isinstance(default, float) else said == str(default)
        assert same, f"docs/magics.md gives {name} the default {said}, the code {default!r}"


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


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_links_to_a_heading_find_it(doc: Path) -> None:
    """``page.md#anchor`` (or ``#anchor``) names a heading the page has: a renamed heading breaks the
    links to it silently otherwise (the site build only logs it)."""
    broken = []
    for target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "#" not in target:
            continue
        file, anchor = target.split("#", 1)
        page = doc if not file else doc.parent / file
        if page.suffix == ".md" and page.exists() and anchor not in _headings(page):
            broken.append(target)
    assert not broken, f"{doc.name}: links to headings that do not exist: {broken}"


def test_the_heading_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Port 5671 blocked: AMQP over WebSockets on 443\n\n## Notes\n\n## Notes\n", encoding="utf-8")
    assert _headings(page) == {"port-5671-blocked-amqp-over-websockets-on-443", "notes", "notes_1"}


TEST_FILE = re.compile(r"(?<![\w/.-])((?:tests/)?(?:\w+/)*test_\w+\.py)\b")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_test_file_a_doc_names_exists(doc: Path) -> None:
    """A test file a page cites as its evidence is there: a path from the root exists as written, a bare
    name in some folder of tests/ (code blocks are examples of a user's project, not this one's)."""
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    ours = {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    missing = [
        name for name in TEST_FILE.findall(text) if not ((ROOT / name).is_file() if "/" in name else name in ours)
    ]
    assert not missing, f"{doc.name} names test files that do not exist: {sorted(set(missing))}"


def test_every_test_file_the_code_names_exists() -> None:
    """Comments and docstrings of the package, the benchmarks, the tools and the build files that
    cite a test file as ``tests/...py`` name one that exists (the tests moved into folders once)."""
    sources = [
        *(ROOT / "sbnotebook").rglob("*.py"),
        *(ROOT / "benchmarks").rglob("*.py"),
        *(ROOT / "tools").rglob("*.py"),
        *(ROOT / name for name in ("noxfile.py", "conftest.py", "pyproject.toml", "setup.py")),
    ]
    cited = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in sources
        for name in TEST_FILE.findall(path.read_text(encoding="utf-8"))
        if name.startswith("tests/")
    }
    assert len(cited) > 20  # the search finds them
    assert not [c for c in cited if not (ROOT / c[1]).is_file()]


def test_every_keyword_a_page_gives_a_core_call_is_one_it_takes() -> None:
    """``core.scan(entity, max_messages=None, ...)`` in docs/*.md: each keyword is a parameter of that
    function of ``sbnotebook.core`` (a rename, 7bf14a3's ``limit`` -> ``max_messages``, leaves none behind)."""
    import inspect

    from sbnotebook import core

    checked, unknown = 0, []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
        for code in re.findall(r"`([^`]+)`", text, flags=re.S):
            for name, args in re.findall(r"\b([a-z_][a-z0-9_]*)\(([^()]*)\)", code):
                fn = getattr(core, name, None) if name in core.__all__ else None
                if not callable(fn):
                    continue
                params = inspect.signature(fn).parameters
                if any(p.kind == p.VAR_KEYWORD for p in params.values()):
                    continue
                checked += 1
                unknown += [
                    f"{doc.name}: {name}({kw}=)" for kw in re.findall(r"(?<![\w.])(\w+)=", args) if kw not in params
                ]
    assert checked > 30  # the search finds the calls
    assert not unknown


def _build_docs() -> Any:
    spec = importlib.util.spec_from_file_location("build_docs", ROOT / "tools" / "build_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_build_finds_a_key_in_any_page_and_passes_placeholders(tmp_path: Path) -> None:
    """tools/build_docs.py's check (CI runs the build itself): it must see a key where one is."""
    scan = _build_docs().scan
    (tmp_path / "tutorials").mkdir()
    page = tmp_path / "tutorials" / "01.html"
    page.write_text("Endpoint=sb://127.0.0.1:5672;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true")
    assert scan(tmp_path, {"c2VjcmV0LWtleQ=="}) == []
    page.write_text("<pre>printed: c2VjcmV0LWtleQ==</pre>")
    assert scan(tmp_path, {"c2VjcmV0LWtleQ=="}) == ["tutorials/01.html"]
    page.write_text("SharedAccessKeyName=x;SharedAccessKey=bm90LWEtcGxhY2Vob2xkZXI=")
    assert scan(tmp_path, set()) == ["tutorials/01.html"]


def test_every_tutorial_is_in_the_docs_site() -> None:
    """mkdocs.yml lists each notebook (the site executes them in that order), through docs/tutorials."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = re.findall(r"tutorials/(\S+\.ipynb)", text)
    assert listed == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert (ROOT / "docs" / "tutorials").resolve() == (ROOT / "notebooks").resolve()
    assert re.search(r"^\s+execute: true\b", text, re.M) and re.search(r"^\s+cache: false\b", text, re.M)


def test_every_tutorial_opens_with_the_decision_it_teaches_and_ends_checking_the_broker() -> None:
    """Each tutorial's first cell says the decision it teaches; its last code cells check what it did on
    the broker, read apart from the kit's reports (counts from the administration API, messages
    peeked with the SDK or the kit's scanner, with asserts), not only a Report (issue 52)."""
    import json

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        assert "**The decision:**" in "".join(cells[0]["source"]).split("**You will learn**")[0], path.name
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        checks = "\n".join(code[-4:])
        assert "assert " in checks and re.search(r"counts\(|peek_messages\(|\.peek\(|on_(the_)?broker\(", checks), (
            path.name
        )


ANALYST_PAGES = ["cheatsheet.md", "from-explorer.md", "glossary.md"]


@pytest.mark.parametrize("page", ANALYST_PAGES)
def test_every_magic_and_core_name_an_analyst_page_mentions_exists(page: str) -> None:
    """The cheat sheet and its neighbours name magics and `core` calls: each must be real (a renamed
    or removed one fails here), and a magic's options must be in its argparse spec."""
    from sbnotebook import core

    path = ROOT / "docs" / page
    if not path.exists():
        pytest.skip(f"docs/{page} not written yet")
    text = path.read_text(encoding="utf-8")
    registered = {name for name in magics.SbMagics.magics["line"]} | set(magics.SbMagics.magics["cell"])
    options = {p.prog.lstrip("%"): {o for a in p._actions for o in a.option_strings} for p in PARSERS}
    unknown_magics, unknown_options, unknown_core = [], [], []
    for line in text.splitlines():
        for code in re.findall(r"`([^`]+)`", line):
            for m in re.finditer(r"%%?(sb_\w+)((?:\s+[^%]*)?)", code):
                name = m.group(1)
                if name not in registered:
                    unknown_magics.append(name)
                    continue
                for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", m.group(2)):
                    if option not in options.get(name, set()):
                        unknown_options.append(f"%{name} {option}")
            for chain in re.findall(r"\bcore\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", code):
                obj: Any = core
                head = chain.split(".")[0]
                if head not in core.__all__:
                    unknown_core.append(chain)
                    continue
                for part in chain.split("."):
                    if not hasattr(obj, part):
                        unknown_core.append(chain)
                        break
                    obj = getattr(obj, part)
    assert "%sb_peek" in text, f"docs/{page} names no magic: the check would find nothing"
    assert not unknown_magics, f"docs/{page}: no such magic: {unknown_magics}"
    assert not unknown_options, f"docs/{page}: no such option: {unknown_options}"
    assert not unknown_core, f"docs/{page}: not in sbnotebook.core.__all__: {unknown_core}"


# Each panel's section in docs/widgets.md and the screenshots it shows: made by tests/widgets/test_browser.py with
# tests/widgets/lab_pages.py's shot() (grid form), so they are the real browser's, made again with
# SBNOTEBOOK_SCREENSHOTS=docs/images.
PANEL_SCREENSHOTS = {
    "MessageBrowser": ("Message browser", ["browser-panel.png"]),
    "TriagePanel": (
        "Dead-letter triage",
        ["triage-panel.png", "triage-confirm-resubmit.png", "triage-after-resubmit.png"],
    ),
    "SettlementPanel": ("Settlement panel", ["settlement-panel.png"]),
    "SendPanel": ("Send panel", ["send-panel.png"]),
    "SessionsPanel": ("Sessions panel", ["sessions-panel.png"]),
    "PurgePanel": ("Purge panel", ["purge-panel.png"]),
    "TailPanel": ("Tail panel", ["tail-panel.png"]),
    "EntityPanel": ("Entity panel", ["entity-panel.png"]),
}


def panel_classes() -> set[str]:
    """Every panel of the widgets package: its VBox subclasses (rows inside panels are HBoxes)."""
    import pkgutil

    import ipywidgets as W

    from sbnotebook.notebook import widgets

    found: set[str] = set()
    for mod in pkgutil.iter_modules(widgets.__path__, "sbnotebook.notebook.widgets."):
        for value in vars(importlib.import_module(mod.name)).values():
            if isinstance(value, type) and issubclass(value, W.VBox) and value.__module__ == mod.name:
                found.add(value.__name__)
    return found


def test_every_panel_has_a_screenshot_the_browser_test_makes_and_the_docs_show() -> None:
    assert panel_classes() == set(PANEL_SCREENSHOTS)  # a new panel needs its screenshots here
    page = (ROOT / "docs" / "widgets.md").read_text(encoding="utf-8")
    browser_test = "".join(  # the test and the page steps it takes (tests/widgets/lab_pages.py)
        (ROOT / "tests" / "widgets" / name).read_text(encoding="utf-8") for name in ("test_browser.py", "lab_pages.py")
    )
    sections = {text.split("\n", 1)[0]: text for text in page.split("\n## ")[1:]}
    for panel, (title, names) in PANEL_SCREENSHOTS.items():
        section = next(text for heading, text in sections.items() if heading.startswith(title))
        for name in names:
            image = ROOT / "docs" / "images" / name
            assert image.is_file() and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
            assert re.search(rf"^!\[[^\]]+\]\(images/{re.escape(name)}\)$", section, re.MULTILINE), (panel, name)
            assert f'shot(page, root, form, "{name}", ' in browser_test, name


def test_tutorial_03_chooses_among_the_four_ways_docs_core_names() -> None:
    """The tutorial's decision table offers exactly the strategies of docs/core.md's "Trying later"."""
    import nbformat

    core_md = (ROOT / "docs" / "core.md").read_text(encoding="utf-8")
    table = core_md[core_md.index("## Trying later") :].split("\n## ")[0]
    documented = {row.split("|")[1].strip() for row in table.splitlines()[3:] if row.startswith("| ")}
    nb = nbformat.read(ROOT / "notebooks" / "03_deferral_four_ways.ipynb", as_version=4)
    chosen = {m.lower() for m in re.findall(r"^\|[^|]+\| \*\*([^*]+)\*\* \|", nb.cells[0].source, re.MULTILINE)}
    assert len(documented) == 4 and chosen == documented, (chosen, documented)


def test_readmes_notebook_section_installs_what_it_needs() -> None:
    """The magics and panels need the `notebook` extra and a front end: the section says how."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## In a notebook") :].split("\n## ")[0]
    commands = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    assert any("pip install" in c and "[notebook]" in c and "jupyter" in c.split("&&")[0] for c in commands), commands


def test_readmes_set_up_has_the_two_commands_ci_runs_as_written() -> None:
    """A newcomer copies two commands from README's "Set up": the demo and the tests; .ci/run runs
    exactly those two."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Set up") :].split("\n## ")[0]
    commands = [c.strip() for c in re.findall(r"```bash\n(.*?)```", section, re.DOTALL)]
    assert len(commands) == 2, commands
    demo, tests = commands
    assert demo.endswith("sbnotebook demo") and tests.endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert demo.replace("pip install", "pip install -q") in ci and tests.replace("pip install", "pip install -q") in ci
