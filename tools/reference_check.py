"""What the API reference (docs/reference/) must show, and whether the built pages show it.

Each page shows the public names of its modules (``PAGES``: each module's ``__all__``); the errors
page shows every error class of the tree (an ``SbError`` a public module exports, ``ERROR_MODULES``),
put there when the site is built (tools/mkdocs_hooks.py). Every one of them has an entry with its
docstring, and every callable its parameters: a function's, or a class's constructor's when the
constructor is the kit's (an exception's, a dataclass's, a panel's).

``gaps(site)`` reads the built pages (mkdocstrings' HTML: each entry's heading, signature and
docstring, not only its anchor); tools/build_docs.py fails the build on any. The same list
(``documented()``) drives tests/project/test_reference.py, which checks the sources without building
the site, and tests each check on a made-up page and module.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Collection
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

PAGES = {  # docs/reference/NAME.md -> the modules whose public names (__all__) it shows
    "core": ("sbnotebook.core",),
    "spark": ("sbnotebook.spark",),
    "emulator": ("sbnotebook.emulator",),
    "widgets": ("sbnotebook.notebook.widgets",),
    "testing": ("sbnotebook.pytest_plugin", "sbnotebook.testing"),
}
ERRORS_PAGE = "errors"
ERROR_MODULES = ("sbnotebook.core", "sbnotebook.spark", "sbnotebook.notebook.magics")


FORMS = {"sync_form": (0, 0), "taking_arguments_of": (0, 1)}
"""The makers of sbnotebook/core/connections/syncforms.py: ``name = maker(operation, ...)`` is a
function; of the maker's arguments, the first index names the function that gives its parameters, the
second the one that gives its docstring and return type (tools/griffe_forms.py shows it so)."""


def made_from(node: ast.stmt) -> tuple[str, str, str] | None:
    """``(name, parameters_from, documented_by)`` of a function made by one of ``FORMS``, as
    ``copy = sync_form(acopy, grace=2.0)`` reads: ``("copy", "acopy", "acopy")``; None for any other
    statement."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
        return None
    call = node.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in FORMS):
        return None
    names = [a.id for a in call.args if isinstance(a, ast.Name)]
    parameters_from, documented_by = FORMS[call.func.id]
    return node.targets[0].id, names[parameters_from], names[documented_by]


@dataclass(frozen=True)
class Public:
    """A public name as its page shows it: ``module.name`` (its entry's anchor), and the
    parameters a reader must see (None: not a callable, or a constructor that is not the kit's)."""

    module: str
    name: str
    parameters: tuple[str, ...] | None


def parameters_of(obj: Any) -> tuple[str, ...] | None:
    """The parameters a call of ``obj`` takes, as ``inspect.signature`` sees them (not ``self``,
    not ``_private`` ones); None for what is not called, or a class built by another library's
    constructor (an exception's own, pyspark's)."""
    if inspect.ismodule(obj) or not callable(obj):
        return None
    if inspect.isclass(obj):
        owner = next((k for k in obj.__mro__ if "__init__" in vars(k)), object)
        if not owner.__module__.startswith("sbnotebook"):
            return None
    signature = inspect.signature(obj)
    return tuple(n for n in signature.parameters if not n.startswith("_") and n not in ("self", "cls"))


def error_classes(without: Collection[str] = ()) -> list[type]:
    """Every error class of the tree a public module exports (its ``__all__``), depth first from
    ``SbError``, each level by name; none of the modules ``without`` (not installed, say)."""
    from sbnotebook.core import SbError

    exported = set()
    for module in (m for m in ERROR_MODULES if m not in without):
        mod = importlib.import_module(module)
        exported |= {obj for obj in (getattr(mod, n) for n in mod.__all__) if inspect.isclass(obj)}

    def below(cls: type) -> list[type]:
        kids = sorted(cls.__subclasses__(), key=lambda k: k.__name__)
        return [cls, *(k for kid in kids for k in below(kid))]

    return [cls for cls in below(SbError) if cls in exported]


def documented(without: Collection[str] = ()) -> dict[str, list[Public]]:
    """Each reference page and the public names it must show, but those of the modules ``without``
    (``sbnotebook.spark`` where pyspark is not installed)."""
    pages: dict[str, list[Public]] = {}
    for page, modules in PAGES.items():
        pages[page] = []
        for module in (m for m in modules if m not in without):
            mod = importlib.import_module(module)
            pages[page] += [Public(module, n, parameters_of(getattr(mod, n))) for n in mod.__all__]
    pages[ERRORS_PAGE] = [Public(c.__module__, c.__qualname__, parameters_of(c)) for c in error_classes(without)]
    return pages


@dataclass
class Entry:
    """One entry of a built page: its anchor, kind (function, class, attribute, module), the text of
    its signature and of its docstring (not its children's, not its bases)."""

    kind: str
    anchor: str = ""
    signature: str = ""
    doc: str = ""


class _Reader(HTMLParser):
    """mkdocstrings' HTML: ``div.doc-object.doc-KIND`` > ``hN.doc-heading#ANCHOR``,
    ``div.doc-signature``, ``div.doc-contents`` (``p.doc-class-bases``, ``div.doc-children``)."""

    ROLES = {"doc-signature": "signature", "doc-contents": "doc", "doc-children": "skip", "doc-class-bases": "skip"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.entries: dict[str, Entry] = {}
        self.stack: list[tuple[str, str | None, Entry | None]] = []  # (tag, role, entry) of open divs, p, headings

    def _entry(self) -> Entry | None:
        return self.stack[-1][2] if self.stack else None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        classes = (given.get("class") or "").split()
        entry = self._entry()
        if tag == "div" and "doc-object" in classes:
            kind = next((c[4:] for c in classes if c.startswith("doc-") and c != "doc-object"), "")
            self.stack.append((tag, "skip", Entry(kind)))
        elif tag in ("div", "p"):
            role = next((r for c, r in self.ROLES.items() if c in classes), None)
            self.stack.append((tag, role, entry))
        elif re.fullmatch(r"h[1-6]", tag) and "doc-heading" in classes and entry is not None and not entry.anchor:
            entry.anchor = given.get("id") or ""
            self.entries.setdefault(entry.anchor, entry)
            self.stack.append((tag, "skip", entry))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        for _tag, role, entry in reversed(self.stack):
            if role is None or entry is None:
                continue
            if role == "signature":
                entry.signature += data
            elif role == "doc":
                entry.doc += data
            return


def entries(html: str) -> dict[str, Entry]:
    """The entries of a built reference page, by anchor."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.entries


def _find(found: dict[str, Entry], public: Public) -> Entry | None:
    """The entry of ``module.name``, or of the name under one of the module's own modules (a name
    documented where it is defined: ``sbnotebook.spark.settle.settle``); a callable's first."""
    pattern = re.compile(rf"{re.escape(public.module)}(\.\w+)*\.{re.escape(public.name)}")
    candidates = [e for a, e in found.items() if a == f"{public.module}.{public.name}" or pattern.fullmatch(a)]
    candidates.sort(key=lambda e: (e.kind not in ("function", "class"), e.anchor != f"{public.module}.{public.name}"))
    return candidates[0] if candidates else None


def _shows_parameter(signature: str, name: str) -> bool:
    """``name`` is one of the parameters between the signature's parentheses."""
    inside = signature.split("(", 1)[1] if "(" in signature else ""
    return re.search(rf"(?:^|[(,])\s*\*{{0,2}}{re.escape(name)}\s*(?:[:=,)]|$)", inside) is not None


def shown_wrong(page: str, found: dict[str, Entry], expected: list[Public]) -> list[str]:
    """What ``page`` (its entries) shows wrong of the names it must show: an entry missing, one
    without its docstring, a callable shown without its parameters (as a value, say)."""
    problems = []
    for public in expected:
        entry = _find(found, public)
        if entry is None:
            problems.append(f"reference/{page}.html: {public.name} has no entry")
            continue
        if not entry.doc.strip():
            problems.append(f"reference/{page}.html: {public.name} is shown without its docstring")
        if public.parameters is None:
            continue
        if entry.kind not in ("function", "class"):
            every = ", ".join(public.parameters) or "none"
            problems.append(
                f"reference/{page}.html: {public.name} is shown as an {entry.kind}, without its parameters ({every})"
            )
            continue
        hidden = [p for p in public.parameters if not _shows_parameter(entry.signature, p)]
        if hidden:
            problems.append(
                f"reference/{page}.html: {public.name} is shown without its parameters ({', '.join(hidden)})"
            )
    return problems


def gaps(site: Path) -> list[str]:
    """What the built reference under ``site`` shows wrong, page by page."""
    problems = []
    for page, expected in documented().items():
        path = site / "reference" / f"{page}.html"
        html = path.read_text(encoding="utf-8") if path.is_file() else ""
        problems += shown_wrong(page, entries(html), expected)
    return problems
