"""docs/testing.md's example is itself a test: its files, as the page shows them, make a project
that pytest runs with the kit's plugin, with and without ``--servicebus-latency-ms 80``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.testing.sessions import run

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n# (?P<path>[\w/.-]+\.py)\n(?P<body>.*?)```", re.S)


def example_files() -> dict[str, str]:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    return {m["path"]: f"# {m['path']}\n{m['body']}" for m in BLOCK.finditer(text)}


def test_the_page_has_a_producer_a_consumer_and_their_tests() -> None:
    files = example_files()
    assert set(files) == {"shop/orders.py", "tests/test_orders.py"}
    assert "def publish" in files["shop/orders.py"] and "def fulfil" in files["shop/orders.py"]


@pytest.mark.parametrize("latency", [None, "80"])
def test_the_example_passes(pytester: pytest.Pytester, latency: str | None) -> None:
    for path, text in example_files().items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (pytester.path / "shop" / "__init__.py").write_text("")
    pytester.syspathinsert()  # the project's package, as an installed project would have it
    extra = ["--servicebus-latency-ms", latency] if latency else []
    result = run(pytester, "tests/test_orders.py", *extra, subprocess=True, timeout=120)
    result.assert_outcomes(passed=4)
