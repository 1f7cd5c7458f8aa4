"""What a test needs from the machine (a program on PATH, a Python package), and what happens when it
is missing: on a developer's machine the test is skipped, saying what to install; under ``CI=true`` it
fails, since a skip there would let the run pass with those tests not run (issue 59). Every skip for a
missing tool or package goes through here (tests/project/test_required.py finds any other).

A run that leaves a package out on purpose names it in ``SBNOTEBOOK_LEFT_OUT`` (``tests.suites.LEFT_OUT``):
the nox sessions on a Databricks runtime's set have no pyspark, and the tests that need it run in
``nox -s spark40`` instead (noxfile.py)."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from tests.suites import LEFT_OUT

# Each tool or package a test may find missing: what needs it and where it comes from.
NEEDED: dict[str, str] = {
    "java": "the Spark tests run a local Spark on Java 17 (.ci/run installs Debian's openjdk-17-jre-headless)",
    "node": "the JavaScript SDK tests run on Node.js (.ci/run installs it when missing)",
    "npm": "the JavaScript SDK tests install @azure/service-bus with npm (.ci/run installs it when missing)",
    "chromium": "the real-browser tests drive Debian's chromium (.ci/run installs it)",
    "playwright": "the real-browser tests drive chromium with Playwright (pip install -e '.[dev]' brings it)",
    "pyspark": "the Spark data source runs on pyspark (pip install -e '.[dev]' brings it; nox -s spark40)",
    "grpc": "Spark Connect needs pyspark's connect extra (pip install -e '.[dev]' brings it)",
    "opentelemetry": "the tracing tests record spans with opentelemetry-sdk (pip install -e '.[dev]' brings it)",
    "pyarrow": "a playbook's parquet audit is written by pandas with pyarrow (pip install -e '.[dev]' brings it)",
    "build": "the release is built with build (pip install -e '.[dev]' brings it)",
    "twine": "the release is checked with twine (pip install -e '.[dev]' brings it)",
}

# The oldest Node.js the JavaScript SDK tests run on: package.json's "engines" (.ci/run reads it too).
NODE_PACKAGE = Path(__file__).parent / "emulator" / "js" / "package.json"


def in_ci() -> bool:
    """``CI`` is set to anything but empty, 0, false or no (.ci/run sets ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(name: str, found: str) -> NoReturn:
    """Skip, or under CI fail, saying what was ``found`` missing and what needs ``name`` (``NEEDED``)."""
    message = f"{found}: {NEEDED[name]}"
    left_out = {n.strip() for n in os.environ.get(LEFT_OUT, "").split(",")}
    if in_ci() and name not in left_out:
        pytest.fail(f"CI is set and {message}", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_tool(name: str, *aliases: str) -> str:
    """The path of program ``name`` (or of the first of ``aliases`` found) on PATH."""
    for candidate in (name, *aliases):
        path = shutil.which(candidate)
        if path is not None:
            return path
    missing(name, f"{' or '.join((name, *aliases))} is not on PATH")


def require_module(name: str) -> ModuleType:
    """Python package ``name``, imported (at a module's top it skips the whole module)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(name.split(".")[0], f"{name} cannot be imported ({exc})")


def node_minimum() -> int:
    """The major version of package.json's ``"engines": {"node": ">=N"}``."""
    engines = json.loads(NODE_PACKAGE.read_text(encoding="utf-8"))["engines"]["node"]
    found = re.fullmatch(r">=\s*(\d+)(\.\d+)*", engines)
    if found is None:
        raise ValueError(f"{NODE_PACKAGE}: engines.node is {engines!r}, not >=N")
    return int(found.group(1))


def require_node() -> tuple[str, str]:
    """Node.js (at least ``node_minimum()``) and npm: their paths. An older Node is as good as none:
    the SDK's packages need the newer runtime (on Node 18 a flow fails on ``crypto is not defined``)."""
    node, npm = require_tool("node"), require_tool("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < node_minimum():
        missing("node", f"Node.js {node_minimum()} or later is not on PATH ({node} is {version or 'silent'})")
    return node, npm
