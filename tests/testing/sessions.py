"""Running pytest sessions of their own with the kit's plugin (tests/testing/test_plugin*.py)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

# Inner runs: no cache folder, pytest-asyncio's loop scope set (it warns otherwise), no xdist unless asked.
QUIET = ["-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function", "-p", "no:randomly"]


# What loading the plugin may add to a run: the package's own light modules (its __init__, the version,
# the plugin module); never the SDK, proton, pandas, IPython, cryptography nor the kit's layers.
HEAVY = ("azure", "uamqp", "proton", "_proton", "cproton", "pandas", "IPython", "cryptography", "numpy")
KIT_LAYERS = ("sbnotebook.core", "sbnotebook.emulator", "sbnotebook.testing", "sbnotebook.notebook", "sbnotebook.spark")


def plugin_extra_modules(with_plugin: set[str], without: set[str]) -> list[str]:
    """What a run with the plugin imported beyond one without it, that it should not have."""
    extra = with_plugin - without
    return sorted(
        m for m in extra if m.split(".")[0] != "sbnotebook" or m.startswith(KIT_LAYERS) or m.split(".")[0] in HEAVY
    )


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


# A user's test module (six tests, a refused send among them; ``record`` writes to SB_RECORD), run only in
# projects of their own: tests/testing/conftest.py keeps it out of this suite.
USER_TESTS = Path(__file__).parent / "user_project" / "test_servicebus.py"

RECORD = """
import json, os
def record(**fields):
    with open(os.environ["SB_RECORD"], "a") as f:
        f.write(json.dumps(fields) + "\\n")
"""
