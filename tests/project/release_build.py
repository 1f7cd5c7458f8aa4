"""The sdist and wheel as a release builds them, for tests/project/test_release.py and tests/project/test_packaging.py.

``python -m build`` on a copy of the repository's files: what a clean clone holds plus work not yet
committed (git's tracked and new files, never ignored ones), so a test sees the tree it runs in and
nothing a previous build or an editable install left beside it. Built once per test process.
``tools/release.py`` builds from a clean clone of HEAD instead and points these tests at its files
with ``SBNOTEBOOK_DIST`` (a folder holding one sdist and one wheel).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path


def repository_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def need_build_tools() -> None:
    """build and twine come with the dev extra; CI must have them, elsewhere their absence is a skip."""
    for module in ("build", "twine"):
        try:
            __import__(module)
        except ImportError:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"{module} is not installed here (pip install -e '.[dev]' brings it)")


def the_one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"{folder}: expected one {pattern}, found {[p.name for p in found]}"
    return found[0]


@functools.cache
def built() -> Built:
    given = os.environ.get("SBNOTEBOOK_DIST")
    if given:
        return Built(the_one(Path(given), "*.tar.gz"), the_one(Path(given), "*.whl"))
    need_build_tools()
    work = Path(tempfile.mkdtemp(prefix="sbnotebook-release-"))
    atexit.register(shutil.rmtree, work, True)
    src = work / "src"
    for rel in repository_files():
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return Built(the_one(work / "dist", "*.tar.gz"), the_one(work / "dist", "*.whl"))
