"""What this install of the kit is: its version and the SDK's, where it was installed from, where its
tutorials are, and so which commands work next (the demo's hints, the "install the extra" lines).

Read, never guessed: the package's own location says whether it runs from a source checkout; the
distribution's ``direct_url.json`` (PEP 610) says whether a wheel came from a local file, a URL or an
index; ``DATABRICKS_RUNTIME_VERSION`` says Databricks. Imports nothing else from the kit.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from importlib.abc import Traversable
from pathlib import Path

from ._version import __version__

PACKAGE_DIR = Path(__file__).resolve().parent


def sdk_version() -> str:
    try:
        return metadata.version("azure-servicebus")
    except metadata.PackageNotFoundError:
        return "not installed"


def versions_line() -> str:
    """One line for a bug report: the kit's version, the SDK's and Python's."""
    return f"sbnotebook {__version__}, azure-servicebus {sdk_version()}, Python {platform.python_version()}"


@dataclass(frozen=True)
class Install:
    """How the running kit was installed.

    ``checkout``: the source checkout the package is imported from (an editable install, or the tree on
    PYTHONPATH), else None. ``source``: for an installed package, what pip installed it from: a local
    wheel file's path, a URL, ``"index"`` (no direct_url.json: a package index), or ``"unknown"`` (no
    metadata for this copy of the package). ``databricks``: running on a Databricks runtime.
    """

    checkout: Path | None
    source: str
    databricks: bool

    @property
    def kind(self) -> str:
        return "checkout" if self.checkout is not None else "databricks" if self.databricks else "installed"

    def requirement(self, extra: str) -> str:
        """What ``pip install`` takes to add an extra to this install (quoted for a shell)."""
        if self.checkout is not None:
            return "-e " + shlex.quote(f"{self.checkout}[{extra}]")
        if self.source == "index":
            return shlex.quote(f"sbnotebook[{extra}]")
        if self.source.startswith(("/", "http://", "https://")) or self.source.endswith(".whl"):
            return shlex.quote(f"{self.source}[{extra}]")
        # Installed from somewhere pip did not record: the extra of the same version, from the same
        # kind of source the user knows; say which version so nothing else is picked up.
        return shlex.quote(f"sbnotebook[{extra}]=={__version__}")

    def pip_install(self, extra: str) -> str:
        return f"pip install {self.requirement(extra)}"


@cache
def install() -> Install:
    return Install(_checkout(), _source(), bool(os.environ.get("DATABRICKS_RUNTIME_VERSION")))


def _checkout() -> Path | None:
    """The source checkout this package runs from: its parent holds this project's pyproject.toml."""
    root = PACKAGE_DIR.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or not (root / "notebooks").is_dir():
        return None
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "sbnotebook"' in text else None


def _source() -> str:
    """Where pip installed this copy from (PEP 610's direct_url.json), if the metadata is this copy's."""
    try:
        dist = metadata.distribution("sbnotebook")
    except metadata.PackageNotFoundError:
        return "unknown"
    # The metadata found first may belong to another copy (a checkout on PYTHONPATH in front of an
    # installed one): it counts only if its files are the ones running.
    init = dist.locate_file("sbnotebook/__init__.py")
    try:
        if Path(str(init)).resolve() != PACKAGE_DIR / "__init__.py":
            return "unknown"
    except OSError:
        return "unknown"
    text = dist.read_text("direct_url.json")
    if text is None:
        return "index"
    try:
        url = str(json.loads(text).get("url", ""))
    except ValueError:
        return "unknown"
    if url.startswith("file://"):
        path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
        return path if Path(path).exists() else "unknown"
    return url or "unknown"


def tutorials() -> Traversable | None:
    """The tutorial notebooks of this install: in a wheel, the package's ``tutorials`` folder (the
    build copies notebooks/ there: setup.py); run from a checkout, its notebooks/ folder."""
    packaged = resources.files("sbnotebook") / "tutorials"
    if packaged.is_dir():
        return packaged
    checkout = _checkout()
    return checkout / "notebooks" if checkout is not None else None


def _shown(path: Path) -> str:
    """A path as the user would type it here: relative to the working folder when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _command() -> str:
    """How the user ran the CLI (the same command runs the next step), else ``python -m sbnotebook``."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "sbnotebook":
        return shlex.quote(sys.argv[0])
    return f"{shlex.quote(sys.executable)} -m sbnotebook"


def _missing(*modules: str) -> list[str]:
    from importlib.util import find_spec

    return [m for m in modules if find_spec(m) is None]


def next_steps() -> list[str]:
    """What to do after the demo, in commands that work for this install."""
    how = install()
    exe = Path(sys.executable)
    if how.checkout is not None:
        root = how.checkout
        at_root = Path.cwd().resolve() == root
        # Paths as typed from the checkout's root; from anywhere else, absolute after a cd.
        show = _shown if at_root else str
        python, jupyter = shlex.quote(show(exe)), shlex.quote(show(exe.parent / "jupyter"))
        cd = "" if at_root else f"cd {shlex.quote(str(root))} && "
        return [
            "Next: the tutorials in notebooks/ (01_quickstart.ipynb first) run on this same embedded emulator:",
            f"  {cd}{python} -m pip install -e '.[dev]' && {jupyter} lab notebooks/01_quickstart.ipynb",
            "or run the emulator yourself with `sbnotebook emulator` and point any SDK at the printed",
            "connection string; see docs/emulator.md.",
        ]
    cli = _command()
    if how.databricks:
        return [
            "Next: the tutorials (01_quickstart first) run on this same embedded emulator. Write them to a",
            f"folder with `{cli} tutorials DIR` and import that folder into the workspace (Workspace >",
            "Import, or the Databricks CLI's `databricks workspace import-dir DIR /Workspace/Users/<you>/...`).",
            f"The emulator on its own: `{cli} emulator --help`.",
        ]
    lines = [
        "Next: the tutorials (01_quickstart.ipynb first) run on this same embedded emulator:",
        f"  {cli} tutorials sbnotebook-tutorials",
    ]
    need = []
    if _missing("IPython", "ipywidgets", "plotly"):
        need.append(how.requirement("notebook"))
    if _missing("jupyterlab"):
        need.append("jupyterlab")
    if need:
        lines.append(f"  {shlex.quote(_shown(exe))} -m pip install {' '.join(need)}")
    lab = exe.parent / "jupyter"
    lines.append(f"  {shlex.quote(_shown(lab)) if need or lab.exists() else 'jupyter'} lab sbnotebook-tutorials")
    lines.append(f"or run the emulator yourself with `{cli} emulator` (`{cli} emulator --help` says how).")
    return lines
