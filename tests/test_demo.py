"""The README's main job runs and accounts for every message."""

from __future__ import annotations

import pytest

from sbnotebook.cli import main


def test_demo_runs_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "order-4: ValidationFailed (quantity must be positive)" in out
    assert "3 completed, 1 dead-lettered" in out
    # Every step goes through the settlement library and prints its Report summary line.
    assert "send orders: 4 sent of 4" in out
    for line in (
        "complete orders: 1 completed of 1",
        "abandon orders: 1 abandoned of 1",
        "defer orders: 1 deferred of 1",
        "dead-letter orders: 1 dead-lettered of 1",
    ):
        assert line in out
    assert out.count("complete orders: 1 completed of 1") == 3  # order-1, then order-2 and order-3 later
    assert "SAS_KEY_VALUE" not in out  # the demo never prints the key
