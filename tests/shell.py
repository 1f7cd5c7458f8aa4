"""A real IPython shell with the extension loaded, for the tests of the %sb_* magics: the ``ip`` and
``sb`` fixtures (a test module takes them with ``ip, sb = shell.ip, shell.sb``), a line magic run
from its text, and a scripted answer to a confirmation prompt."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension, unload_ipython_extension
from sbnotebook.notebook.magics import SbMagics


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.testing import globalipapp

    # One shell per process: start_ipython() returns None once another module has started it.
    return globalipapp.start_ipython() or globalipapp.get_ipython()


@pytest.fixture
def sb(ip: Any, emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    config = copy.deepcopy(ip.config)  # a test's %config stays in it (the shell is the process's)
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    ip.run_line_magic("sb_connect", emulator.connection_string)
    capsys.readouterr()
    yield magics
    unload_ipython_extension(ip)
    ip.config.clear()
    ip.config.update(config)


def line(ip: Any, text: str) -> Any:
    name, _, rest = text.partition(" ")
    return ip.run_line_magic(name, rest)


def answer(monkeypatch: pytest.MonkeyPatch, reply: str) -> list[str]:
    asked: list[str] = []

    def fake_input(prompt: str = "") -> str:
        asked.append(prompt)
        return reply

    monkeypatch.setattr(builtins, "input", fake_input)
    return asked
