"""The sdist and wheel as a release builds them, for tests/project/test_release.py and tests/project/test_packaging.py.

``python -m build`` on a copy of the repository's files: what a clean clone holds plus work not yet
committed (git's tracked and new files, never ignored ones), so a test sees the tree it runs in and
nothing a previous build or an editable install left beside it. Built once per run: the first
xdist worker to need it builds into the run's shared folder (``SBNOTEBOOK_TEST_SHARED``, made by
conftest.py) under a file lock, the others wait for it and take the same files (before, each of the
three or four workers that ran a release or packaging test built its own). ``tools/release.py`` builds
from a clean clone of HEAD instead and points these tests at its files with ``SBNOTEBOOK_DIST`` (a
folder holding one sdist and one wheel).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.required import require_module

ROOT = Path(__file__).resolve().parents[2]
SHARED = "SBNOTEBOOK_TEST_SHARED"  # a folder every process of one pytest run sees (conftest.py)


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
    """build and twine come with the dev extra: without them a skip, or under CI a failure (tests/required.py)."""
    for module in ("build", "twine"):
        require_module(module)


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
    shared = os.environ.get(SHARED)
    if not shared:  # a process of its own (not under this suite's conftest.py)
        work = Path(tempfile.mkdtemp(prefix="sbnotebook-release-"))
        atexit.register(shutil.rmtree, work, True)
        return _build(work / "dist")
    dist = Path(shared) / "release-dist"
    with _locked(Path(shared) / "release-dist.lock"):
        if not (dist / "complete").exists():  # a worker that died while building left no mark
            shutil.rmtree(dist, ignore_errors=True)
            _build(dist)
            (dist / "complete").write_text("ok\n")
    return Built(the_one(dist, "*.tar.gz"), the_one(dist, "*.whl"))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` between the run's processes (released when its holder ends)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(dist: Path) -> Built:
    work = Path(tempfile.mkdtemp(prefix="sbnotebook-release-"))
    try:
        src = work / "src"
        for rel in repository_files():
            target = src / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, target)
        done = subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return Built(the_one(dist, "*.tar.gz"), the_one(dist, "*.whl"))
