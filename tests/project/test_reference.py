"""The API reference shows everything public: each public name (tools/reference_check.py's
``documented()``: the ``__all__`` of core, spark, the emulator, the panels, the pytest plugin and
testing, and every error class) has a docstring the reference can read from the source, and a
public function is a ``def`` whose parameters are the ones Python calls it with.

The reference (mkdocstrings, through griffe) reads the source without running it: a function made
by an assignment (``send = wrap(asend)``) shows as a value, without parameters or docstring
(``functools.wraps`` sets them at run time only), and a constant's docstring is the string right
after it. These tests read the source the same way, with ``ast``; the built pages themselves are
checked by tools/build_docs.py (CI builds the site), with the checker tested here on a made-up page.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.required import require_module

ROOT = Path(__file__).resolve().parents[2]


def _reference_check() -> Any:
    if "reference_check" not in sys.modules:
        spec = importlib.util.spec_from_file_location("reference_check", ROOT / "tools" / "reference_check.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["reference_check"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules["reference_check"]


# ------------------------------------------------------------------- the source, as griffe reads it


@dataclass
class Found:
    """A name's definition in the source: its kind (function, class, attribute, module), docstring
    and, for a function, its parameters."""

    kind: str
    doc: str | None
    parameters: tuple[str, ...] = ()


def _file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Top-level statements, those inside ``if`` and ``try`` blocks too."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _statements(node.body) + _statements(node.orelse)
        elif isinstance(node, ast.Try):
            found += _statements(node.body + node.orelse + node.finalbody)
    return found


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    a = node.args
    every = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs]
    every += [a.kwarg] if a.kwarg else []
    return tuple(p.arg for p in every if p.arg not in ("self", "cls") and not p.arg.startswith("_"))


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def definition(root: Path, module: str, name: str) -> Found | None:
    """Where ``module.name`` is defined, following imports through the source under ``root``; None
    when it is not found there (or comes from outside it)."""
    path = _file(root, module)
    if path is None:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = _statements(tree.body)
    found: Found | None = None
    for i, node in enumerate(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = Found("function", ast.get_docstring(node), _parameters(node))
        elif isinstance(node, ast.ClassDef) and node.name == name:
            found = Found("class", ast.get_docstring(node))
        elif (made := _reference_check().made_from(node)) and made[0] == name:
            # ``copy = sync_form(acopy)``: the reference shows acopy's parameters (tools/griffe_forms.py)
            takes, documented = definition(root, module, made[1]), definition(root, module, made[2])
            found = Found("function", documented and documented.doc, takes.parameters if takes else ())
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = Found("attribute", _attribute_docstring(body[i + 1 : i + 2]))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module, node, path.name == "__init__.py")
                    submodule = _module(root, f"{source}.{alias.name}")
                    # ``from . import part`` in a package: the module, never this file again
                    found = submodule if source == module else definition(root, source, alias.name) or submodule
    return found or _module(root, f"{module}.{name}")


def _attribute_docstring(after: list[ast.stmt]) -> str | None:
    """The string right after an assignment: its docstring, as griffe reads it."""
    if after and isinstance(after[0], ast.Expr) and isinstance(after[0].value, ast.Constant):
        value = after[0].value.value
        return value if isinstance(value, str) else None
    return None


def _module(root: Path, module: str) -> Found | None:
    path = _file(root, module)
    return None if path is None else Found("module", ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))))


def source_problems(root: Path, publics: list[Any]) -> list[str]:
    """What the reference could not show of each public name, read from the source: no docstring, a
    function that is not a ``def`` (its parameters unseen), a ``def`` whose parameters are not those
    the function is called with."""
    problems = []
    for public in publics:
        where = f"{public.module}.{public.name}"
        found = definition(root, public.module, public.name)
        if found is None:
            problems.append(f"{where}: not found in the source")
            continue
        if not (found.doc or "").strip():
            problems.append(f"{where}: no docstring")
        if public.parameters is None:
            continue
        if found.kind == "attribute":
            problems.append(
                f"{where}: an assignment, not a def: its parameters {public.parameters} are not in the source"
            )
        elif found.kind == "function" and found.parameters != public.parameters:
            problems.append(f"{where}: its def takes {found.parameters}, it is called with {public.parameters}")
    return problems


def test_every_public_name_has_a_docstring_and_every_function_its_signature_in_the_source() -> None:
    """Spark's names aside (they import pyspark, which a Databricks runtime's set lacks: the next test)."""
    publics = [p for page in _reference_check().documented(without=("sbnotebook.spark",)).values() for p in page]
    names = {f"{p.module}.{p.name}" for p in publics}
    assert {"sbnotebook.core.send", "sbnotebook.emulator.Emulator", "sbnotebook.core.errors.ServiceError"} <= names
    assert source_problems(ROOT, publics) == []


def test_every_public_name_of_spark_has_a_docstring_and_its_signature_in_the_source() -> None:
    require_module("pyspark")
    pages = _reference_check().documented()
    publics = pages["spark"] + [p for p in pages["errors"] if p.module.startswith("sbnotebook.spark")]
    assert {"register", "OptionError", "SendFailedError"} <= {p.name for p in publics}
    assert source_problems(ROOT, publics) == []


MADE_UP = {
    "__init__.py": '''
        """A made-up package."""
        from . import parts
        from .impl import LIMIT, UNSAID, Thing, Said, documented, takes_other, wrapped

        __all__ = ["LIMIT", "UNSAID", "Said", "Thing", "documented", "parts", "takes_other", "wrapped"]
        ''',
    "parts.py": "",
    "impl.py": '''
        import functools
        import inspect

        LIMIT = 5
        """How many."""
        UNSAID = 3


        class Thing:
            pass


        class Said:
            """A class with its docstring."""


        def documented(a, *, b=1):
            """A def with its docstring."""


        def _body(x, y=2):
            """The body."""


        wrapped = functools.wraps(_body)(lambda *args, **kwargs: _body(*args, **kwargs))


        def takes_other(given):
            """Its signature is another's, set at run time."""


        takes_other.__signature__ = inspect.signature(_body)
        ''',
}


def test_the_source_check_fails_on_a_made_up_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each fault once: a constant, a class and a module without docstrings, a function made by an
    assignment, a def whose run-time signature is another's."""
    package = tmp_path / "sbn_madeup_reference"
    package.mkdir()
    for name, text in MADE_UP.items():
        (package / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    check = _reference_check()
    module = importlib.import_module("sbn_madeup_reference")
    try:
        publics = [check.Public(module.__name__, n, check.parameters_of(getattr(module, n))) for n in module.__all__]
    finally:
        for name in [m for m in sys.modules if m.startswith("sbn_madeup_reference")]:
            del sys.modules[name]
    assert source_problems(tmp_path, publics) == [
        "sbn_madeup_reference.UNSAID: no docstring",
        "sbn_madeup_reference.Thing: no docstring",
        "sbn_madeup_reference.parts: no docstring",
        "sbn_madeup_reference.takes_other: its def takes ('given',), it is called with ('x', 'y')",
        "sbn_madeup_reference.wrapped: no docstring",  # functools.wraps gives it one at run time only
        "sbn_madeup_reference.wrapped: an assignment, not a def: its parameters ('x', 'y') are not in the source",
    ]


# ------------------------------------------------------------------------------ the built pages


def _entry(kind: str, anchor: str, signature: str | None, doc: str, children: str = "") -> str:
    """An entry as mkdocstrings writes it (the parts the checker reads)."""
    shown = (
        "" if signature is None else f'<div class="doc-signature highlight"><pre><code>{signature}</code></pre></div>'
    )
    return (
        f'<div class="doc doc-object doc-{kind}"><h2 id="{anchor}" class="doc doc-heading">'
        f'<span class="doc doc-object-name">{anchor.rsplit(".", 1)[-1]}</span>'
        f'<span class="doc doc-labels"><small><code>{kind}</code></small></span></h2>{shown}'
        f'<div class="doc doc-contents "><p class="doc doc-class-bases">Bases: <code>SbError</code></p>'
        f'{doc}<div class="doc doc-children">{children}</div></div></div>'
    )


PAGE = "".join(
    [
        '<div class="doc doc-object doc-module"><div class="doc doc-contents first">'
        '<p>The module.</p><div class="doc doc-children">',
        _entry("function", "pkg.peek", "peek(<span>entity</span>: str, *, max_messages: int = 100)", "<p>Peek.</p>"),
        # As the reference showed core.send before it was a def: a value, its text naming a parameter.
        _entry("attribute", "pkg.send", 'send = renamed(sync_form(asend, "... max_messages ..."))', ""),
        _entry("class", "pkg.Panel", None, "<p>A panel.</p>"),
        _entry("function", "pkg.copy", "copy(source, *, max_messages=None)", "<p>Copy.</p>"),
        # Its method has a docstring; the class has none.
        _entry("class", "pkg.Quiet", "Quiet()", "", _entry("function", "pkg.Quiet.run", "run(self)", "<p>Run.</p>")),
        _entry("attribute", "pkg.LIMIT", "LIMIT = 5", "<p>How many.</p>"),
        "</div></div></div>",
    ]
)


def test_the_page_check_reads_each_entry_signature_and_docstring() -> None:
    check = _reference_check()
    found = check.entries(PAGE)
    assert set(found) == {"pkg.peek", "pkg.send", "pkg.Panel", "pkg.copy", "pkg.Quiet", "pkg.Quiet.run", "pkg.LIMIT"}
    assert found["pkg.peek"].kind == "function" and "max_messages: int" in found["pkg.peek"].signature
    assert found["pkg.peek"].doc.strip() == "Peek."  # not the bases, not the heading's labels
    assert found["pkg.Quiet"].doc.strip() == ""  # its method's docstring is the method's


def test_the_page_check_fails_on_a_callable_shown_without_its_parameters_or_docstring() -> None:
    check = _reference_check()
    expected = [
        check.Public("pkg", "peek", ("entity", "max_messages")),
        check.Public("pkg", "send", ("entity", "messages", "max_messages")),
        check.Public("pkg", "Panel", ("entity",)),
        check.Public("pkg", "copy", ("source", "target", "max_messages")),
        check.Public("pkg", "Quiet", ()),
        check.Public("pkg", "LIMIT", None),
        check.Public("pkg", "purge", ("entity",)),
    ]
    assert check.shown_wrong("api", check.entries(PAGE), expected) == [
        "reference/api.html: send is shown without its docstring",
        "reference/api.html: send is shown as an attribute, without its parameters (entity, messages, max_messages)",
        "reference/api.html: Panel is shown without its parameters (entity)",
        "reference/api.html: copy is shown without its parameters (target)",
        "reference/api.html: Quiet is shown without its docstring",
        "reference/api.html: purge has no entry",
    ]
    assert check.shown_wrong("api", check.entries(PAGE), expected[:1] + expected[-2:-1]) == []


def test_a_name_defined_in_a_module_of_its_own_is_found_under_it() -> None:
    """``sbnotebook.spark.settle`` is both a module and the function in it: the page shows the
    function as ``sbnotebook.spark.settle.settle``."""
    check = _reference_check()
    page = _entry("module", "sbnotebook.spark.settle", None, "<p>The module.</p>") + _entry(
        "function", "sbnotebook.spark.settle.settle", "settle(spark, df)", "<p>Settle.</p>"
    )
    assert (
        check.shown_wrong("spark", check.entries(page), [check.Public("sbnotebook.spark", "settle", ("spark", "df"))])
        == []
    )
