"""docs/testing.md's examples are themselves tests: their files, as the page shows them, make a
project that pytest runs with the kit's plugin: the producer and consumer with and without
``--servicebus-latency-ms 80``; "Testing time" on the manual clock, and under ``--servicebus-live``
(against a stand-in namespace), where its marked tests are skipped, saying why."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from sbnotebook.emulator import Emulator
from tests.testing.sessions import run

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n# (?P<path>[\w/.-]+\.py)\n(?P<body>.*?)```", re.S)
TIME_TESTS = 6
# A time test's whole body (the SDK opening a sender and a receiver or two, about 0.5 s each, and
# closing them) in a run that simulates a minute, an hour or a day: it cannot have waited for any.
TIME_TEST_SECONDS = 8.0


def example_files() -> dict[str, str]:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    return {m["path"]: f"# {m['path']}\n{m['body']}" for m in BLOCK.finditer(text)}


def test_the_page_has_a_producer_a_consumer_their_tests_and_the_time_tests() -> None:
    files = example_files()
    assert set(files) == {"shop/orders.py", "tests/test_orders.py", "tests/test_time.py"}
    assert "def publish" in files["shop/orders.py"] and "def fulfil" in files["shop/orders.py"]
    time_tests = files["tests/test_time.py"]
    assert time_tests.count("\ndef test_") == TIME_TESTS
    assert "sleep" not in time_tests


def _write_project(pytester: pytest.Pytester) -> None:
    for path, text in example_files().items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (pytester.path / "shop" / "__init__.py").write_text("")
    pytester.syspathinsert()  # the project's package, as an installed project would have it


@pytest.mark.parametrize("latency", [None, "80"])
def test_the_example_passes(pytester: pytest.Pytester, latency: str | None) -> None:
    _write_project(pytester)
    extra = ["--servicebus-latency-ms", latency] if latency else []
    result = run(pytester, "tests/test_orders.py", *extra, subprocess=True, timeout=120)
    result.assert_outcomes(passed=4)


def call_seconds(junit: Path) -> dict[str, float]:
    """Each test's call phase, as pytest timed it (``junit_duration_report=call``)."""
    return {case.attrib["name"]: float(case.attrib["time"]) for case in ET.parse(junit).iter("testcase")}


# The harness's own conftest in the project: how long each test spent inside advance(), the only
# place a test of time could wait for it.
TIMED_ADVANCE = """
import json, os, time
import pytest
from sbnotebook.emulator.timekeeping import Timekeeping

spent = {}
_advance = Timekeeping.advance

def timed(self, by):
    test = os.environ["PYTEST_CURRENT_TEST"].split(" ")[0]
    start = time.perf_counter()
    try:
        return _advance(self, by)
    finally:
        spent[test] = spent.get(test, 0.0) + time.perf_counter() - start

Timekeeping.advance = timed

def pytest_sessionfinish(session):
    with open(os.environ["ADVANCE_RECORD"], "w") as f:
        json.dump(spent, f)
"""


def test_the_time_examples_pass_without_waiting_for_the_times_they_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_project(pytester)
    pytester.makeconftest(TIMED_ADVANCE)
    record = pytester.path / "advance.json"
    monkeypatch.setenv("ADVANCE_RECORD", str(record))
    junit = pytester.path / "junit.xml"
    result = run(
        pytester, "tests/test_time.py", f"--junitxml={junit}", "-o", "junit_duration_report=call", subprocess=True
    )
    result.assert_outcomes(passed=TIME_TESTS)
    took = call_seconds(junit)
    assert len(took) == TIME_TESTS
    assert max(took.values()) < TIME_TEST_SECONDS, took
    in_advance = json.loads(record.read_text())
    assert len(in_advance) == TIME_TESTS  # every test called it (the plain one to be refused)
    assert max(in_advance.values()) < 0.5, in_advance
    print("time tests' bodies (s):", {name: round(seconds, 2) for name, seconds in took.items()})
    print("of which in advance() (ms):", {name.split("::")[-1]: round(s * 1000, 2) for name, s in in_advance.items()})


@pytest.fixture
def stand_in() -> Iterator[Emulator]:
    """The 'real namespace' of a live run: an emulator with no entities of its own."""
    with Emulator({"UserConfig": {"Namespaces": [{"Name": "live-stand-in"}]}}) as emu:
        yield emu


def test_live_skips_the_manual_clock_tests_saying_why(
    pytester: pytest.Pytester, stand_in: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_project(pytester)
    monkeypatch.setenv("SERVICEBUS_CONNECTION_STRING", stand_in.connection_string)
    result = run(pytester, "tests/test_time.py", "--servicebus-live", "-rs")
    result.assert_outcomes(skipped=TIME_TESTS)
    # five marked tests for the clock; the unmarked one for asking for servicebus_emulator
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    clock = [line for line in skipped if "servicebus_clock('manual') needs the embedded emulator" in line]
    assert len(clock) == TIME_TESTS - 1, skipped
    assert "test_without_the_marker" not in "".join(clock)
    assert stand_in.broker.entities == []  # what the live run created for the unmarked test is gone
