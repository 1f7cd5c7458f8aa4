"""Running pytest sessions of their own with the kit's plugin (tests/test_pytest_plugin*.py)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

# Inner runs: no cache folder, pytest-asyncio's loop scope set (it warns otherwise), no xdist unless asked.
QUIET = ["-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function", "-p", "no:randomly"]


def entry_point_registered() -> bool:
    return any(e.name == "servicebus" and e.value == "sbnotebook.pytest_plugin" for e in entry_points(group="pytest11"))


def plugin_args() -> list[str]:
    """What loads the plugin in an inner run: nothing when the install registered its entry point
    (an editable install made before it existed did not: then by module name)."""
    return [] if entry_point_registered() else ["-p", "sbnotebook.pytest_plugin"]


def no_plugin_args() -> list[str]:
    return ["-p", "no:servicebus"] if entry_point_registered() else []


def run(pytester: pytest.Pytester, *args: str, subprocess: bool = False, timeout: float = 90) -> pytest.RunResult:
    full = [*QUIET, *plugin_args(), *args]
    if subprocess:
        return pytester.runpytest_subprocess(*full, timeout=timeout)
    return pytester.runpytest_inprocess(*full)


def records(path: Path) -> list[dict[str, Any]]:
    """What the inner tests wrote (one JSON object a line)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


RECORD = """
import json, os
def record(**fields):
    with open(os.environ["SB_RECORD"], "a") as f:
        f.write(json.dumps(fields) + "\\n")
"""
