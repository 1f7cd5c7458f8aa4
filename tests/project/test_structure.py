"""The package's structure, checked from its imports: no import circles (``TYPE_CHECKING`` imports
included), no private name of one module used by another, the notebook and Spark layers, the pytest
plugin's ``testing/`` and ``demo.py`` using only the settlement library's public surface
(``sbnotebook.core.__all__``), and ``azure.*`` imported at run time only in the SDK seam
(``core/sdk/``).

Each rule is a function of a source tree, so each has a test on a small tree that breaks it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import sbnotebook.core

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "sbnotebook"

# The SDK boundary modules (core/sdk/__init__.py lists them: receiver, opening, management, messages,
# encoded, spares) reach into the SDK's private API on purpose, each listing what it uses,
# with a test that fails when the SDK changes (tests/core/test_boundary.py); the emulator's AMQP layer, its link
# terms and its event loop do the same with proton's (sbnotebook/emulator/net/protonprivate.py lists the
# names, tests/emulator/net/test_proton_boundary.py checks them). Their reach-through into third-party
# code is not checked here.
BOUNDARIES = {
    "sbnotebook.core.sdk",
    "sbnotebook.core.sdk.encoded",
    "sbnotebook.core.sdk.management",
    "sbnotebook.core.sdk.messages",
    "sbnotebook.core.sdk.opening",
    "sbnotebook.core.sdk.receiver",
    "sbnotebook.core.sdk.spares",
    "sbnotebook.emulator.amqp.handler",
    "sbnotebook.emulator.amqp.deliver",
    "sbnotebook.emulator.amqp.terms",
    "sbnotebook.emulator.net.loop",
}
DUNDER_PROTOCOLS = {"_repr_html_", "_repr_mimebundle_", "_ipython_display_"}
# Modules outside the SDK seam that import ``azure.*`` at run time, each with why. The emulator imports
# nothing from the rest of the kit, so it cannot take azure-core's types from core.
SDK_OUTSIDE_THE_SEAM = {
    # The emulator's Entra ID tenant: EmulatorCredential.get_token hands the SDK azure-core's AccessToken
    # and refuses a scope with azure-core's ClientAuthenticationError, as azure-identity's credentials do
    # (the kit tells a credential's failure by that class: core/sdk/failures.py sign_in_failure).
    "sbnotebook.emulator.security.entra",
}
# What uses core from outside it through its public surface only (core.__all__).
CORE_USERS = (f"{PACKAGE}.notebook", f"{PACKAGE}.spark", f"{PACKAGE}.testing", f"{PACKAGE}.demo")


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in (root / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(root: Path) -> Iterator[tuple[str, str, str]]:
    """(importing module, imported module, name) for every ``from X import name`` in the package."""
    mods = modules(root)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = _imported(name, path, node)
                for alias in node.names:
                    yield name, target, alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield name, alias.name, ""


def import_graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for source, target, name in imports(root):
        submodule = f"{target}.{name}"
        for dep in (submodule if submodule in mods else target,):
            if dep in mods and dep != source:
                graph[source].add(dep)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _own_private_attributes(tree: ast.AST) -> set[str]:
    """Private names a module defines itself (attributes it assigns, functions, classes)."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    return own


def private_uses(root: Path) -> list[str]:
    """``from .x import _name`` across modules, and ``obj._name`` where the module does not define
    ``_name`` itself (self/cls excepted, and the SDK/proton boundaries' reach into third-party code)."""
    mods = modules(root)
    found = []
    for source, target, name in imports(root):
        private = name.startswith("_") and not name.startswith("__")
        if private and target.startswith(PACKAGE) and f"{target}.{name}" not in mods:
            found.append(f"{source} imports {target}.{name}")
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _own_private_attributes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            if node.attr in own or node.attr in DUNDER_PROTOCOLS or name in BOUNDARIES:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.append(f"{name}:{node.lineno} uses .{node.attr}")
    return sorted(found)


def outside_core_surface(root: Path, public: set[str], users: tuple[str, ...] = CORE_USERS[:2]) -> list[str]:
    """Names the ``users`` (modules or packages; the notebook and Spark layers by default) take from
    core that are not in ``core.__all__``: imported from it or from one of its modules, or read as an
    attribute of core itself (``from sbnotebook import core`` ... ``core.name``)."""

    def within(module: str) -> bool:
        return any(module == user or module.startswith(user + ".") for user in users)

    found = []
    for source, target, name in imports(root):
        if not within(source) or not target.startswith(f"{PACKAGE}.core"):
            continue
        if target != f"{PACKAGE}.core" or name not in public:
            found.append(f"{source} imports {target}.{name}")
    for source, path in modules(root).items():
        if not within(source):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and _imported(source, path, node) == PACKAGE
            for alias in node.names
            if alias.name == "core"
        }
        attributes = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
        for node in attributes:
            if getattr(node.value, "id", None) in bound and node.attr not in public:
                found.append(f"{source}:{node.lineno} uses core.{node.attr}")
    return sorted(found)


def runtime_imports_of(path: Path, prefix: str) -> bool:
    """Does the module import ``prefix`` (``azure``) when it runs? Imports under ``if TYPE_CHECKING``
    are for the type checker only and do not count."""

    def visit(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                if any(visit(n) for n in child.orelse):
                    return True
                continue
            if isinstance(child, ast.Import) and any(a.name.split(".")[0] == prefix for a in child.names):
                return True
            if isinstance(child, ast.ImportFrom) and not child.level and (child.module or "").split(".")[0] == prefix:
                return True
            if visit(child):
                return True
        return False

    return visit(ast.parse(path.read_text(encoding="utf-8")))


def sdk_importers(root: Path) -> list[str]:
    """The package's modules that import ``azure.*`` at run time."""
    return sorted(name for name, path in modules(root).items() if runtime_imports_of(path, "azure"))


def outside_the_seam(root: Path, allowed: set[str]) -> list[str]:
    """Modules that import ``azure.*`` at run time outside ``core/sdk/`` and are not ``allowed``."""
    seam = f"{PACKAGE}.core.sdk"
    return [m for m in sdk_importers(root) if m != seam and not m.startswith(seam + ".") and m not in allowed]


def layout(root: Path, package: str) -> tuple[list[str], list[str]]:
    """A package's modules directly in its folder, and its sub-packages."""
    folder = root / Path(*package.split("."))
    flat = sorted(p.stem for p in folder.glob("*.py"))
    subpackages = sorted(p.parent.name for p in folder.glob("*/__init__.py"))
    return flat, subpackages


def long_functions(root: Path, limit: int) -> list[str]:
    """Functions (docstring included) longer than ``limit`` lines."""
    found = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append(f"{name}.{node.name}: {length} lines")
    return sorted(found)


def test_core_and_the_emulator_are_folders_of_parts() -> None:
    # A newcomer sees the parts from the folders: a few modules flat, the rest by concern or layer.
    for package in (f"{PACKAGE}.core", f"{PACKAGE}.emulator"):
        flat, subpackages = layout(ROOT, package)
        assert len(subpackages) >= 3, f"{package}: {subpackages}"
        assert len(flat) <= 12, f"{package} has {len(flat)} modules directly in its folder: {flat}"


def test_only_the_sdk_seam_imports_the_sdk() -> None:
    # One seam where an SDK upgrade lands (core/sdk/), anywhere in the package; the layers above, the
    # pytest plugin and the demo take what they need from core's public names.
    importers = sdk_importers(ROOT)
    seam = [m for m in importers if m.startswith(f"{PACKAGE}.core.sdk.")]
    assert seam and len(seam) <= 8, seam
    assert outside_the_seam(ROOT, SDK_OUTSIDE_THE_SEAM) == []
    assert set(importers) >= SDK_OUTSIDE_THE_SEAM  # an exception whose module imports azure no longer goes


def test_no_function_is_over_80_lines() -> None:
    # A function a reader can hold at once; a longer one is named parts waiting to be found.
    assert long_functions(ROOT, 80) == []


def test_no_import_circles() -> None:
    assert circles(import_graph(ROOT)) == []


def unresolved(root: Path) -> list[str]:
    """Imports of the package's own modules that name none (mypy's ``ignore_missing_imports`` lets a
    module moved away pass): ``from .gone import x`` or ``from sbnotebook.core.gone import x``."""
    mods = modules(root)
    found = set()
    for source, target, name in imports(root):
        if target.split(".")[0] != PACKAGE:
            continue
        if target not in mods and f"{target}.{name}" not in mods:
            found.add(f"{source} imports {target}")
    return sorted(found)


def test_every_import_of_the_package_finds_its_module() -> None:
    assert unresolved(ROOT) == []


def test_the_unresolved_import_check_can_fail(tmp_path: Path) -> None:
    root = source_tree(
        tmp_path, {"__init__.py": "", "core/__init__.py": "from .a import ok\nfrom .gone import x\n", "core/a.py": ""}
    )
    assert unresolved(root) == ["sbnotebook.core imports sbnotebook.core.gone"]


def test_no_private_name_crosses_a_module() -> None:
    assert private_uses(ROOT) == []


def test_the_notebook_and_spark_layers_use_only_core_all() -> None:
    assert outside_core_surface(ROOT, set(sbnotebook.core.__all__)) == []


def test_the_pytest_plugin_and_the_demo_use_only_core_all() -> None:
    public = set(sbnotebook.core.__all__)
    users = (f"{PACKAGE}.testing", f"{PACKAGE}.demo")
    assert outside_core_surface(ROOT, public, users) == []
    # the check sees them: testing/ and demo.py do use core
    assert outside_core_surface(ROOT, public - {"sdk_client", "sdk_admin_client"}, users)


def source_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A made-up package tree under ``tmp_path`` (for the checks' own tests)."""
    for rel, text in files.items():
        path = tmp_path / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_structure_checks_can_fail(tmp_path: Path) -> None:
    root = source_tree(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "from .a import ok\n__all__ = ['ok']\n",
            "core/a.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nok = 1\n_hidden = 2\n"
            ),
            "core/b.py": "from .a import ok, _hidden\nclass B: ...\n",
            "spark/__init__.py": "",
            "spark/s.py": (
                "from ..core import ok\nfrom ..core.a import ok as again\n\ndef f(conn):\n    return conn._pool\n"
            ),
        },
    )
    assert circles(import_graph(root)) == [["sbnotebook.core.a", "sbnotebook.core.b"]]
    assert private_uses(root) == [
        "sbnotebook.core.b imports sbnotebook.core.a._hidden",
        "sbnotebook.spark.s:5 uses ._pool",
    ]
    assert outside_core_surface(root, {"ok"}) == ["sbnotebook.spark.s imports sbnotebook.core.a.ok"]


def test_the_core_surface_check_can_fail_for_the_plugin_and_the_demo(tmp_path: Path) -> None:
    root = source_tree(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "from .a import ok\n__all__ = ['ok']\n",
            "core/a.py": "ok = 1\nhidden = 2\n",
            "testing/__init__.py": "",
            "testing/t.py": "def f():\n    from sbnotebook.core.a import hidden\n    return hidden\n",
            "testing/u.py": "from sbnotebook.core import ok\n",
            "demo.py": "from . import core as kit\n\nkit.ok\nkit.hidden\n",
            "demo_more.py": "from .core.a import hidden\n",  # not the demo: a module whose name begins the same
        },
    )
    users = ("sbnotebook.testing", "sbnotebook.demo")
    assert outside_core_surface(root, {"ok"}, users) == [
        "sbnotebook.demo:4 uses core.hidden",
        "sbnotebook.testing.t imports sbnotebook.core.a.hidden",
    ]
    assert outside_core_surface(root, {"ok"}) == []  # the notebook and Spark layers: none here


def test_the_seam_layout_and_length_checks_can_fail(tmp_path: Path) -> None:
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))
    root = source_tree(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/a.py": "def f():\n    from azure.servicebus import X\n    return X\n",
            "core/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import azure.core\n",
            "core/sdk/__init__.py": "",
            "core/sdk/api.py": "import azure.servicebus\n",
            "spark/__init__.py": "",
            "spark/s.py": f"def g():\n{long_body}",
        },
    )
    seam = source_tree(
        tmp_path / "seam",
        {
            "__init__.py": "",
            "demo.py": "def peek():\n    from azure.servicebus import ServiceBusClient\n",
            "testing/__init__.py": "",
            "testing/live.py": "import azure.identity\n",
            "emulator/__init__.py": "",
            "emulator/entra.py": "def token():\n    from azure.core.credentials import AccessToken\n",
            "core/__init__.py": "",
            "core/sdk/__init__.py": "",
            "core/sdk/api.py": "import azure.servicebus\n",
        },
    )
    assert outside_the_seam(seam, set()) == [
        "sbnotebook.demo",
        "sbnotebook.emulator.entra",
        "sbnotebook.testing.live",
    ]
    assert outside_the_seam(seam, {"sbnotebook.emulator.entra"}) == ["sbnotebook.demo", "sbnotebook.testing.live"]
    assert sdk_importers(root) == ["sbnotebook.core.a", "sbnotebook.core.sdk.api"]
    assert outside_the_seam(root, set()) == ["sbnotebook.core.a"]
    assert layout(root, "sbnotebook.core") == (["__init__", "a", "b"], ["sdk"])
    assert long_functions(root, 80) == ["sbnotebook.spark.s.g: 81 lines"]


SUFFIXES = ("s", "es", "ing", "ed")


def suffix_twins(names: set[str]) -> list[tuple[str, str]]:
    """Pairs of module names one of which is the other with a suffix (``route``/``routes``,
    ``copies``/``copying``, ``time``/``timing``): two names for one word, told apart by an ending."""
    stems = {
        n: {n, n.rstrip("e"), n.removesuffix("ies") + "y", n.removesuffix("es"), n.removesuffix("s")} for n in names
    }
    found = []
    for a in sorted(names):
        for b in sorted(names):
            if a < b and any(
                sa + suffix == sb or sb + suffix == sa
                for sa in stems[a]
                for sb in stems[b]
                for suffix in ("", *SUFFIXES)
            ):
                found.append((a, b))
    return found


def test_no_two_modules_of_core_differ_only_by_a_suffix() -> None:
    names = {p.stem for p in (ROOT / PACKAGE / "core").rglob("*.py")} - {"__init__"}
    assert len(names) > 60
    assert suffix_twins(names) == []


def test_the_suffix_check_can_fail() -> None:
    assert suffix_twins({"route", "routes", "routing", "times", "timing", "copies", "copying", "peek"}) == [
        ("copies", "copying"),
        ("route", "routes"),
        ("route", "routing"),
        ("routes", "routing"),
        ("times", "timing"),
    ]
