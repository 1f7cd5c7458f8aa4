"""The Python blocks of README.md and docs/*.md run under pytest, through Sybil (sybil.readthedocs.io):
its Markdown lexer finds every fenced ``python`` block, its skip directive marks the few that cannot
run here, and its doctest parser compares the output a block shows (a block that starts with ``>>>``;
``...`` stands for what changes from run to run, such as a duration).

What this module adds is the page's surroundings, not a parser:

- each page's blocks run in order in one namespace (Sybil's document), and the page is one unit of
  work for pytest-xdist (tests/xdist_groups.py), so they run on one worker, one after another;
- a page runs against an in-process ``Emulator`` of its own (the default topology plus the entities
  the pages name, ``topology()``), made the connection the kit finds with nothing configured
  (``SERVICEBUS_CONNECTION_STRING``; the environment is restored after the page), in a temporary
  working folder (files a page writes land there); the live connections and emulators it opened are
  closed when the page ends, and a module a block made by hand is taken out of ``sys.modules``;
- blocks are IPython cells, as in a notebook: ``%sb_...`` magics and ``x = %sb_receive ...`` are
  turned into Python by IPython's own input transformer and run on the suite's IPython shell (the
  page loads the extension itself, ``%load_ext sbnotebook``, as a reader does); a confirmation the
  page asks for is typed as it asks (``Type 'purge' to go on``);
- ``dbutils`` is a stand-in whose secrets ``my-scope/servicebus`` and ``my-scope/servicebus-connection``
  hold the page's connection string
  (Databricks' dbutils does not exist here; what a block does with it runs as written).

The collector is ``pytest_collect_file`` (the repository's conftest.py imports it); Sybil is imported
only when a Markdown page is collected, so the nox sessions, which pass test files only, need it not.
tests/project/test_doc_examples.py checks the counts (at most one block in ten marked) and shows a
renamed function failing its page.
"""

from __future__ import annotations

import builtins
import copy
import doctest
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = ("README.md", "docs/*.md")
CONNECTION_ENV = "SERVICEBUS_CONNECTION_STRING"

# The entities the pages name beyond the default topology (sbnotebook/emulator/topology.py).
_EXTRA_QUEUES = [
    {"Name": "carts", "Properties": {"RequiresSession": True}},
    {"Name": "sq", "Properties": {"RequiresSession": True}},
    {"Name": "audit-retry", "Properties": {}},
    {"Name": "orders-copy", "Properties": {}},
    {"Name": "parked", "Properties": {}},
    {"Name": "replayed", "Properties": {}},
]
_EXTRA_SUBSCRIPTIONS = [{"Name": "audit", "Properties": {}}, {"Name": "billing", "Properties": {}}]


def pages() -> list[Path]:
    """README.md and docs/*.md: the pages whose Python blocks run."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def topology() -> dict[str, Any]:
    """The default topology plus the entities the pages name."""
    from sbnotebook.emulator import DEFAULT_TOPOLOGY

    config = copy.deepcopy(DEFAULT_TOPOLOGY)
    (namespace,) = config["UserConfig"]["Namespaces"]
    namespace["Queues"] += copy.deepcopy(_EXTRA_QUEUES)
    (events,) = namespace["Topics"]
    events["Subscriptions"] += copy.deepcopy(_EXTRA_SUBSCRIPTIONS)
    return config


class IPythonEvaluator:
    """A block as a notebook cell: IPython's input transformer turns magics into calls on the shell,
    then the result runs in the page's namespace (with line numbers of the page)."""

    def __call__(self, example: Any) -> None:
        __tracebackhide__ = True
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(str(example.parsed))
        code = compile(example.line * "\n" + source, example.path, "exec", dont_inherit=True)
        exec(code, example.namespace)
        example.namespace.pop("__builtins__", None)


def _typist(prompt: str = "") -> str:
    """What a reader types at a confirmation: the word the question asks for."""
    asked = re.search(r"Type '([^']+)' to go on", prompt)
    return asked.group(1) if asked else ""


class _Dbutils:
    """Databricks' ``dbutils``, as far as the pages use it: ``secrets.get``."""

    def __init__(self, secrets: dict[tuple[str, str], str]) -> None:
        self.secrets = self
        self._secrets = secrets

    def get(self, scope: str, key: str) -> str:
        return self._secrets[(scope, key)]


def _unload(shell: Any) -> None:
    """The extension unloaded as IPython unloads it, so that the next page's ``%load_ext sbnotebook``
    loads it afresh (IPython skips an extension it holds as loaded)."""
    from sbnotebook.notebook import unload_ipython_extension

    if "sbnotebook" in shell.extension_manager.loaded:
        shell.extension_manager.unload_extension("sbnotebook")
    else:
        unload_ipython_extension(shell)


class Page:
    """What one page's blocks run in (Sybil's ``setup`` and ``teardown`` with its namespace)."""

    def __init__(self) -> None:
        self._saved: dict[str, Any] = {}

    def setup(self, namespace: dict[str, Any]) -> None:
        from IPython.testing import globalipapp

        from sbnotebook.core.connections.registry import registry
        from sbnotebook.emulator import Emulator

        emulator = Emulator(config=topology()).start()
        folder = tempfile.mkdtemp(prefix="sbnotebook-doc-")
        shell = globalipapp.start_ipython() or globalipapp.get_ipython()
        _unload(shell)
        self._saved = {
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "input": builtins.input,
            "emulator": emulator,
            "folder": folder,
            "shell": shell,
            "dbutils": shell.user_ns.get("dbutils"),
            "config": copy.deepcopy(shell.config),  # a page's %config (full_tracebacks...) stays on its page
            "modules": set(sys.modules),
            "live": set(map(id, registry._live.values())),
        }
        os.environ[CONNECTION_ENV] = emulator.connection_string
        os.chdir(folder)
        builtins.input = _typist
        secrets = ("servicebus", "servicebus-connection")
        dbutils = _Dbutils({("my-scope", key): emulator.connection_string for key in secrets})
        shell.user_ns["dbutils"] = dbutils  # a --secret reference is read from the shell's namespace
        namespace.update(get_ipython=lambda: shell, dbutils=dbutils, __name__="__main__")

    def teardown(self, namespace: dict[str, Any]) -> None:
        from sbnotebook.core.connections.registry import registry
        from sbnotebook.emulator import Emulator

        saved, self._saved = self._saved, {}
        spark = namespace.get("spark")
        if spark is not None and hasattr(spark, "streams"):  # a session the page started: stopped, as
            for query in spark.streams.active:  # tests/conftest.py stops a module's
                query.stop()
            spark.stop()
        _unload(saved["shell"])
        saved["shell"].config.clear()
        saved["shell"].config.update(saved["config"])
        if saved["dbutils"] is None:
            saved["shell"].user_ns.pop("dbutils", None)
        else:
            saved["shell"].user_ns["dbutils"] = saved["dbutils"]
        for value in list(namespace.values()):  # an emulator a block started and a failure left running
            if isinstance(value, Emulator) and value is not saved["emulator"]:
                value.stop()
        for name in set(sys.modules) - saved["modules"]:  # a module a block made by hand (no spec)
            if getattr(sys.modules[name], "__spec__", None) is None:
                del sys.modules[name]
        for live in list(registry._live.values()):  # the live connections the page opened
            if id(live) not in saved["live"]:
                registry.forget(live)
        emulator = saved["emulator"]
        builtins.input = saved["input"]
        os.chdir(saved["cwd"])
        os.environ.clear()  # as it was: SERVICEBUS_CONNECTION_STRING and what a block set
        os.environ.update(saved["env"])
        emulator.stop()
        shutil.rmtree(saved["folder"], ignore_errors=True)
        namespace.clear()


def make_sybil(patterns: tuple[str, ...] = PATTERNS, path: Path = ROOT) -> Any:
    """The Sybil that collects the pages: Python blocks as IPython cells, doctest blocks compared,
    the skip directive (``<!-- skip: next "why" -->``)."""
    from sybil import Sybil
    from sybil.evaluators.doctest import DocTestEvaluator
    from sybil.parsers.abstract.doctest import DocTestStringParser
    from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

    class Blocks(PythonCodeBlockParser):
        """Sybil's Python block parser (doctest when a block starts with ``>>>``), each other block
        evaluated as an IPython cell."""

        def __init__(self) -> None:
            self.doctest_parser = DocTestStringParser(DocTestEvaluator(doctest.ELLIPSIS))
            self.codeblock_parser = CodeBlockParser("python", IPythonEvaluator())

    page = Page()
    return Sybil(
        parsers=[Blocks(), SkipParser()],
        patterns=list(patterns),
        path=str(path),
        setup=page.setup,
        teardown=page.teardown,
    )


@cache
def _collector() -> Callable[..., Any]:
    return make_sybil().pytest()  # type: ignore[no-any-return]


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    """README.md and docs/*.md, collected by Sybil (others: None, pytest's own collectors)."""
    if file_path.suffix != ".md":
        return None
    return _collector()(file_path, parent)
