"""docs/names.md against the code, with what is checked read from the code (tests/project/surface.py:
every flag, every public parameter, every Spark option, every setting), not from a list kept by hand:

- no name a user types holds a retired word (names.md's "Retired words"), unless names.md says it is
  another idea ("Same word, another idea"); nor does a label a panel shows;
- ``-n`` is at most N messages wherever it exists, and a short flag means one thing in every magic;
- a flag takes one kind of value wherever it is: one metavar in every magic and command line
  (``--connection NAME`` beside ``--connection CONN``, a connection string, were two ideas);
- a unit is said once: a name with ``_ms`` has no twin in seconds;
- each row's name is in every place the row says, and in no place it does not say; its cells are
  the same words (camelCase, kebab-case, a setting's command prefix);
- each old name of "Old names" is taken where the row says and nowhere used as a name of its own,
  and every old name the code still takes is in that table.

Each check is a function returning what it found wrong; the last tests run them on a small made-up
surface and see them fail. The old names' behaviour (they work, and warn once) is in
tests/project/test_old_names.py."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pytest

from sbnotebook.notebook.config import project_settings
from sbnotebook.notebook.magics import SbMagics
from tests.project import surface
from tests.project.surface import Typed, words

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "names.md"


def table(heading: str, doc: Path = DOC) -> list[list[str]]:
    """The rows of the first table under ``## heading``, each a list of its cells."""
    text = doc.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]  # past the header and |---|


def codes(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def cell(text: str) -> tuple[str, str | None, list[str]] | None:
    """`name` (`-s`): `place`, `place` -> (name, short, places); a dash -> None."""
    if text in ("\u2013", "-"):  # an en dash, as the docs write it, or a hyphen
        return None
    head, _, places = text.partition(":")
    named = codes(head)
    return named[0], (named[1] if len(named) > 1 else None), codes(places)


NAMES = table("The names")
EMULATOR = table("The emulator and the pytest plugin")
OTHER_IDEAS = table("Same word, another idea")
RETIRED = table("Retired words")
OLD = table("Old names")

# Which places each column's names live in, and how a cell's place is written there.
FAMILIES = {
    "magic": lambda p: p.startswith("%"),
    "python": lambda p: not p.startswith(("%", "Spark ", "SbMagics", "sbnotebook", "pytest", "servicebus_topology")),
    "spark": lambda p: p.startswith("Spark "),
    "setting": lambda p: p == "SbMagics",
    "cli": lambda p: p.startswith("sbnotebook"),
    "pytest": lambda p: p == "pytest",
}
COLUMNS = {"names": ("magic", "python", "spark", "setting"), "emulator": ("cli", "python", "pytest")}
QUALIFIERS = {"peek", "receive", "tail", "default", "no", "servicebus"}  # a setting's command, a default of, ...


def family_places(family: str, places: list[str]) -> list[str]:
    return [f"Spark {p}" for p in places] if family == "spark" else places


def declared() -> dict[tuple[str, str], set[str] | None]:
    """(family, name) -> the places the tables give it (None: the cell names none, so anywhere)."""
    found: dict[tuple[str, str], set[str] | None] = {}
    for rows, columns in ((NAMES, COLUMNS["names"]), (EMULATOR, COLUMNS["emulator"])):
        for row in rows:
            for family, text in zip(columns, row[1:], strict=True):
                if family == "setting":
                    for name in codes(text):
                        found[(family, name)] = {"SbMagics"}
                    continue
                said = cell(text)
                if said is None:
                    continue
                name, short, places = said
                listed = set(family_places(family, places))
                for key in [(family, name), *([(family, short)] if short else [])]:
                    before = found.get(key, set())
                    found[key] = None if before is None or not listed else before | listed
    return found


# ------------------------------------------------------------------------------------ checks


def retired_problems(typed: Iterable[Typed], retired: list[list[str]], other: set[tuple[str, str]]) -> list[str]:
    """Each name in use that holds a retired word (a sequence of words), unless it is another idea."""
    out = []
    for t in surface.live(typed):
        w = words(t.name)
        for word in retired:
            held = any(w[i : i + len(word)] == word for i in range(len(w) - len(word) + 1))
            if held and (t.name, t.place) not in other:
                out.append(f"{t.place} {t.name}: holds the retired word {' '.join(word)!r}")
    return out


def short_flag_problems(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """``-n`` is ``--max-messages`` wherever it is (and ``--max-messages`` has ``-n``); any other
    short flag stands for the same long one in every parser."""
    out = []
    meaning: dict[str, set[str]] = defaultdict(set)
    for prog, parser in parsers.items():
        options = dict(parser._option_string_actions)
        for option, action in options.items():
            if len(option) == 2 and option.startswith("-") and option != "-h":
                longs = [o for o in action.option_strings if o.startswith("--")]
                meaning[option].add(longs[0] if longs else f"(no long name, dest {action.dest})")
                if option == "-n" and longs != ["--max-messages"]:
                    out.append(f"{prog}: -n is {longs or action.dest}, not --max-messages")
        if "--max-messages" in options and options.get("-n") is not options["--max-messages"]:
            out.append(f"{prog}: --max-messages without -n")
    out += [f"{short} means {sorted(longs)} in different parsers" for short, longs in meaning.items() if len(longs) > 1]
    return out


def metavar_problems(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """A flag that takes a value takes the same kind wherever it is, said by its metavar (``NAME``,
    ``NAME=VALUE``, ``JSON``): ``%sb_entities --set NAME=VALUE`` beside ``%sb_session_state --set
    JSON`` were two ideas under one word. Subcommands' flags count (``sbnotebook topology export``)."""
    said: dict[str, dict[str, str]] = defaultdict(dict)

    def walk(place: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{place} {name}", sub)
            elif action.nargs != 0 and action.option_strings:
                for option in action.option_strings:
                    if option.startswith("--"):
                        said[option][place] = str(action.metavar or action.dest.upper())

    for prog, parser in parsers.items():
        walk(prog, parser)
    clashes = [(flag, by) for flag, by in sorted(said.items()) if len(set(by.values())) > 1]
    return [f"{flag} takes {dict(sorted(by.items()))}" for flag, by in clashes]


def unit_problems(typed: Iterable[Typed]) -> list[str]:
    """A unit is said once: ``ms`` only at the end of a name, and a name in milliseconds has no twin
    without a unit or in seconds (``latency`` beside ``latency_ms``)."""
    names = {t.name: t for t in surface.live(typed)}
    by_words = {tuple(words(n)): t for n, t in names.items()}
    out = []
    for t in names.values():
        w = words(t.name)
        if ("ms" in w[:-1]) or any(x in w for x in ("millis", "milliseconds")):
            out.append(f"{t.place} {t.name}: milliseconds are said by a last word ms")
        if w[-1:] == ["ms"]:
            for twin in (tuple(w[:-1]), (*w[:-1], "seconds")):
                if twin in by_words:
                    found = by_words[twin]
                    out.append(f"{found.place} {found.name}: the same idea as {t.name} ({t.place}) in another unit")
    return out


def row_problems(
    typed: Iterable[Typed], tables: dict[tuple[str, str], set[str] | None], other: Iterable[tuple[str, str]] = ()
) -> list[str]:
    """Each name of the tables is in every place they give it, and in use nowhere else (but where
    names.md says the same word is another idea: ``other``, (name, place) pairs)."""
    where: dict[tuple[str, str], set[str]] = defaultdict(set)
    elsewhere = set(other)
    for t in surface.live(typed):
        if (t.name, t.place) in elsewhere:
            continue
        for family, holds in FAMILIES.items():
            if holds(t.place):
                where[(family, t.name)].add(t.place)
    out = []
    spark = surface.spark_installed()
    for (family, name), places in tables.items():
        if family == "spark" and not spark:
            continue
        if places and not spark:  # sbspark's functions are read only where pyspark is installed
            places = {place for place in places if not place.startswith("sbspark")}
            if not places:
                continue
        found = where.get((family, name), set())
        if places is None:
            if not found:
                out.append(f"{name}: in no {family} place")
            continue
        out += [f"{place}: has no {name}" for place in sorted(places - found)]
        out += [f"{place} takes {name}, which docs/names.md does not list there" for place in sorted(found - places)]
    return out


def unwritten_problems(typed: Iterable[Typed], written: set[str]) -> list[str]:
    """A name a magic takes as a flag and Python as a keyword (the same words) is written in
    docs/names.md, as one idea on a row of its tables or as a word that is another idea somewhere:
    so a second meaning cannot come in unsaid (``--batch``, a locked batch, beside a send's
    ``batch=``, which packed messages into one operation)."""
    families: dict[tuple[str, ...], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for t in surface.live(typed):
        for family in ("magic", "python"):
            if FAMILIES[family](t.place):
                families[tuple(words(t.name))][family].add(t.place)
    said = {tuple(words(name)) for name in written}
    return [
        f"{'-'.join(w)}: a flag of {sorted(f['magic'])} and a keyword of {sorted(f['python'])[:4]} that"
        " docs/names.md does not write down (a row if one idea, 'Same word, another idea' if not)"
        for w, f in sorted(families.items())
        if len(f) == 2 and w not in said
    ]


def same_words(row: list[str], columns: tuple[str, ...]) -> list[str]:
    """A row's names are the same words: a leading qualifier (a setting's command, ``default``,
    ``no``) aside, and a Spark option's trailing ``Ref`` (it takes a reference)."""
    spellings = []
    for family, text in zip(columns, row[1:], strict=True):
        named = codes(text) if family == "setting" else ([] if cell(text) is None else [cell(text)[0]])  # type: ignore[index]
        for name in named:
            w = words(name)
            w = w[1:] if len(w) > 1 and w[0] in QUALIFIERS else w
            spellings.append(w[:-1] if family == "spark" and w[-1:] == ["ref"] and len(w) > 1 else w)
    return [] if len({tuple(s) for s in spellings}) <= 1 else [f"{row[0]}: {spellings}"]


def old_places(where: str) -> list[str]:
    """The places an old-names row gives, as surface.py writes them; none for a value (a search's
    word, a reference, an action) or a module's own name (``core``, ``sbspark``: test_old_names.py)."""
    named = codes(where)
    if where.endswith(" value"):  # a value a name takes (test_old_names.py), not a name
        return []
    if where.startswith("Spark"):
        return [f"Spark {kind}" for kind in named] if surface.spark_installed() else []
    if where.startswith("`SbMagics`"):
        return ["SbMagics"]
    if where.startswith("`sbnotebook "):  # a command line's subcommand: its flags, as surface.py places them
        return named
    if "action" in where or named in ([], ["core"], ["sbspark"]) or any(" " in n for n in named):
        return []
    return named


def old_name_problems(typed: Iterable[Typed], old_rows: list[list[str]]) -> list[str]:
    """Each old name is still taken (as old) where its row says and is no name in use there; each
    old name the code takes is in the table."""
    taken = {(t.place, t.name) for t in typed if t.old}
    in_use = {(t.place, t.name) for t in surface.live(typed)}
    listed = {(place, old.strip("`")) for old, where, _ in old_rows for place in old_places(where)}
    if not surface.spark_installed():  # sbspark's functions are read only where pyspark is installed
        listed = {(place, name) for place, name in listed if not place.startswith("sbspark")}
    out = [f"{p}: {n} is a name in use, and an old name in docs/names.md" for p, n in sorted(listed & in_use)]
    out += [f"{p}: takes the old name {n}, which docs/names.md does not list" for p, n in sorted(taken - listed)]
    out += [
        f"{p}: docs/names.md lists the old name {n}, which it does not take" for p, n in sorted(listed - taken - in_use)
    ]
    return out


# ----------------------------------------------------------------------- the code, checked


TYPED = surface.everything()


def test_the_tables_are_read() -> None:
    """The checks below find something: each table has its rows and each row its cells, and the code
    has names to check (magics, core, panels, the emulator; Spark's where pyspark is installed)."""
    assert len(NAMES) >= 30 and all(len(row) == 5 for row in NAMES), NAMES
    assert len(EMULATOR) >= 3 and all(len(row) == 4 for row in EMULATOR), EMULATOR
    assert len(OLD) >= 50 and all(len(row) == 3 for row in OLD), OLD
    assert len(RETIRED) >= 8 and len(OTHER_IDEAS) >= 3
    places = {t.place.split(".")[0].split(" ")[0] for t in TYPED}
    assert {"%sb_peek", "core", "TriagePanel", "Emulator", "SbMagics", "sbnotebook", "pytest"} <= places


OTHER = {(codes(row[0])[0], place) for row in OTHER_IDEAS for place in codes(row[1])}


def test_no_name_in_use_holds_a_retired_word() -> None:
    retired = [codes(row[0])[0].split() for row in RETIRED]
    assert retired_problems(TYPED, retired, OTHER) == []


def test_no_panel_label_holds_a_retired_word() -> None:
    """A panel's labels say an idea in its words: the browser's first sequence number is "From
    sequence number", as --from-sequence-number says it (it was "From seq")."""
    found = surface.labels()
    assert {"From sequence number", "Count groups", "Search"} <= {t.name for t in found}
    retired = [codes(row[0])[0].split() for row in RETIRED]
    assert retired_problems(found, retired, OTHER) == []


def test_n_is_at_most_n_messages_wherever_it_is() -> None:
    found = surface.parsers()
    assert sum("-n" in p._option_string_actions for p in found.values()) >= 6
    assert short_flag_problems(found) == []


def test_a_flag_takes_one_kind_of_value_wherever_it_is() -> None:
    found = surface.parsers()
    assert sum("--connection" in p._option_string_actions for p in found.values()) >= 1
    assert metavar_problems(found) == []


def test_a_unit_is_said_once() -> None:
    assert unit_problems(TYPED) == []


def test_each_name_is_where_docs_names_md_says_and_nowhere_else() -> None:
    assert row_problems(TYPED, declared(), OTHER) == []


def test_a_name_both_a_flag_and_a_keyword_is_written_down() -> None:
    written = {name for _, name in declared()} | {name for name, _ in OTHER}
    assert unwritten_problems(TYPED, written) == []


@pytest.mark.parametrize("row", [(r, "names") for r in NAMES] + [(r, "emulator") for r in EMULATOR], ids=str)
def test_a_rows_names_are_the_same_words(row: tuple[list[str], str]) -> None:
    cells, which = row
    if which == "emulator" and cells[0].startswith("milliseconds added to every reply on one entity"):
        pytest.skip("--slow ENTITY=MS: the command line's value says the unit (docs/names.md)")
    assert same_words(cells, COLUMNS[which]) == []


def test_each_old_name_is_taken_where_the_table_says_and_only_there() -> None:
    assert old_name_problems(TYPED, OLD) == []


def test_each_setting_is_taken_by_the_settings_loader(tmp_path: Path) -> None:
    named = [n for row in NAMES for n in codes(row[4])]
    assert named
    keys = "\n".join(f"{n.replace('_', '-')} = 1" for n in named)
    (tmp_path / "pyproject.toml").write_text(f"[tool.sbnotebook]\n{keys}\n")
    assert set(project_settings(SbMagics.class_trait_names(config=True), tmp_path)) == set(named)


# ------------------------------------------------------------ the checks, seen failing


def _made_up() -> tuple[dict[str, argparse.ArgumentParser], list[Typed]]:
    """A small surface with what the checks refuse: -n as a page size, a --from-seq flag, a
    count= keyword, a latency in seconds beside one in milliseconds."""
    browse = argparse.ArgumentParser(prog="%sb_made_up_browse", add_help=False)
    browse.add_argument("-n", "--page-size", type=int)
    peek = argparse.ArgumentParser(prog="%sb_made_up_peek", add_help=False)
    peek.add_argument("--max-messages", type=int)
    peek.add_argument("--from-seq", type=int)
    peek.add_argument("--batch")

    def made_up(
        entity: str, *, count: int = 1, latency: float = 0.0, latency_ms: float = 0.0, batch: bool = True
    ) -> None:
        """A function with a retired word and a unit said twice, and a ``batch`` that is no locked batch."""

    parsers = {"%sb_made_up_browse": browse, "%sb_made_up_peek": peek}
    typed = [t for prog, p in parsers.items() for t in surface.parser_flags(prog, p)]
    typed += list(surface.parameters("core.made_up", made_up))
    return parsers, typed


def test_the_checks_fail_on_a_made_up_surface() -> None:
    parsers, typed = _made_up()
    retired = [codes(row[0])[0].split() for row in RETIRED]
    assert retired_problems(typed, retired, set()) == [
        "%sb_made_up_peek --from-seq: holds the retired word 'seq'",
        "core.made_up count: holds the retired word 'count'",
    ]
    assert short_flag_problems(parsers) == [
        "%sb_made_up_browse: -n is ['--page-size'], not --max-messages",
        "%sb_made_up_peek: --max-messages without -n",
    ]
    assert unit_problems(typed) == ["core.made_up latency: the same idea as latency_ms (core.made_up) in another unit"]
    state = argparse.ArgumentParser(prog="%sb_made_up_state", add_help=False)
    state.add_argument("--set", metavar="JSON")
    entities = argparse.ArgumentParser(prog="%sb_made_up_entities", add_help=False)
    entities.add_argument("--set", metavar="NAME=VALUE", action="append")
    entities.add_argument("--yes", action="store_true")
    assert metavar_problems({"%sb_made_up_state": state, "%sb_made_up_entities": entities}) == [
        "--set takes {'%sb_made_up_entities': 'NAME=VALUE', '%sb_made_up_state': 'JSON'}"
    ]
    rows = {("magic", "--max-messages"): {"%sb_made_up_peek", "%sb_other"}, ("python", "count"): {"core.made_up"}}
    assert row_problems(typed, rows) == [
        "%sb_other: has no --max-messages",
    ]
    assert row_problems(typed, {("python", "latency_ms"): set()}) == [
        "core.made_up takes latency_ms, which docs/names.md does not list there"
    ]
    assert row_problems(typed, {("python", "latency_ms"): set()}, {("latency_ms", "core.made_up")}) == []
    assert unwritten_problems(typed, {"latency_ms"}) == [
        "batch: a flag of ['%sb_made_up_peek'] and a keyword of ['core.made_up'] that docs/names.md does not"
        " write down (a row if one idea, 'Same word, another idea' if not)"
    ]
    assert unwritten_problems(typed, {"--batch"}) == []
    assert same_words(["idea", "`--max-messages`: `%sb_peek`", "`limit`: `core.peek`", "-", "-"], COLUMNS["names"])
    label = 'class Browser:\n    def __init__(self):\n        self.box = W.IntText(value=1, description="From seq")\n'
    assert retired_problems(surface.labels_in(label), retired, set()) == [
        "Browser From seq: holds the retired word 'seq'"
    ]
    old_rows = [["`count`", "`core.made_up`", "`max_messages`"]]
    assert old_name_problems(typed, old_rows) == [
        "core.made_up: count is a name in use, and an old name in docs/names.md"
    ]


def test_the_changelog_names_every_rename_with_its_old_name() -> None:
    """Each row of "Old names" is in CHANGELOG.md's unreleased section: its old name and its new one,
    each in a code span there."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    unreleased = text.split("\n## ", 2)[1]
    assert unreleased.startswith("Unreleased"), unreleased[:40]
    spans = codes(unreleased)

    def said(name: str) -> bool:
        return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", span) for span in spans)

    missing = [f"{old} -> {new}" for old, _, new in OLD if not (said(old.strip("`")) and said(new.strip("`")))]
    assert missing == [], f"CHANGELOG.md does not say these renames: {missing}"
