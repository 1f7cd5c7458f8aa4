"""The README's main job runs and accounts for every message."""

from __future__ import annotations

import pytest

from sbnotebook.cli import main


def test_demo_runs_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "order-4: ValidationFailed (quantity must be positive)" in out
    assert "3 completed, 1 dead-lettered" in out
    assert "SAS_KEY_VALUE" not in out  # the demo never prints the key
