"""A real IPython shell with the extension loaded, for the tests of the %sb_* magics: the ``ip`` and
``sb`` fixtures (a test module takes them with ``ip, sb = shell.ip, shell.sb``), a line magic run
from its text, and a scripted answer to a confirmation prompt."""

from __future__ import annotations

import builtins
import contextlib
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


@contextlib.contextmanager
def loaded(ip: Any, capsys: pytest.CaptureFixture[str], *connects: str) -> Iterator[SbMagics]:
    """The extension loaded afresh, each ``%sb_connect`` line run; after, unloaded and the shell's
    config as it was (a test's %config stays in it otherwise: the shell is the process's)."""
    config = copy.deepcopy(ip.config)
    unload_ipython_extension(ip)
    magics = load_ipython_extension(ip)
    for connect in connects:
        ip.run_line_magic("sb_connect", connect)
    capsys.readouterr()
    try:
        yield magics
    finally:
        unload_ipython_extension(ip)
        ip.config.clear()
        ip.config.update(config)


@pytest.fixture
def sb(ip: Any, emulator: Emulator, capsys: pytest.CaptureFixture[str]) -> Iterator[SbMagics]:
    with loaded(ip, capsys, emulator.connection_string) as magics:
        yield magics


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
