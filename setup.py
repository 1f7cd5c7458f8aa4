"""The one build step pyproject.toml cannot say: the wheel carries the tutorials.

Every notebook in notebooks/ is copied into the built package as sbnotebook/tutorials/ (package data
that ``sbnotebook tutorials DIR`` writes out), so git holds one copy of each. An editable install
copies nothing: it reads notebooks/ in place (sbnotebook/about.py). tests/project/test_release.py checks that
the built wheel's copies are the same bytes as notebooks/.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


class BuildPyWithTutorials(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        found = sorted(NOTEBOOKS.glob("*.ipynb"))
        if not found:  # an sdist made without MANIFEST.in's notebooks line: fail, never ship without them
            raise SystemExit(f"no tutorials in {NOTEBOOKS}: the wheel must carry them")
        target = Path(self.build_lib) / "sbnotebook" / "tutorials"
        self.mkpath(str(target))
        for notebook in found:
            self.copy_file(str(notebook), str(target / notebook.name))


setup(cmdclass={"build_py": BuildPyWithTutorials})
