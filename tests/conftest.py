"""Shared fixtures: a fresh embedded emulator per test, with second-scale durations.

(Timeouts and hang diagnostics for the whole suite, tutorials included, are in the repository's
root ``conftest.py``.)"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from sbnotebook.core import close_all
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator, ManualClock

from .helpers import QuickCloseClient, emulator_config
from .required import require_tool

TEST_TOPOLOGY: dict[str, Any] = emulator_config(
    "testns",
    {
        "q": {"LockDuration": "PT30S"},
        "short": {"LockDuration": "PT1S", "MaxDeliveryCount": 3},
        "once": {"MaxDeliveryCount": 1},
        "dedup": {"RequiresDuplicateDetection": True, "DuplicateDetectionHistoryTimeWindow": "PT10M"},
        "ttl-dl": {"DefaultMessageTimeToLive": "PT1S", "DeadLetteringOnMessageExpiration": True},
        "ttl-drop": {"DefaultMessageTimeToLive": "PT1S"},
        "fwd-src": {"ForwardTo": "fwd-dst"},
        "fwd-dst": {},
        "dl-fwd": {"MaxDeliveryCount": 1, "ForwardDeadLetteredMessagesTo": "dl-target"},
        "dl-target": {},
        "tiny": {"MaxMessageSizeInKilobytes": 4},
        "sq": {"RequiresSession": True, "LockDuration": "PT2S"},
        # Azure's default 1-minute lock: for tests where another receiver holds a session
        # while the kit works (sq's 2 s lock can lapse on a busy host and free it).
        "sq60": {"RequiresSession": True},
    },
    [
        {
            "Name": "st",
            "Subscriptions": [{"Name": "s", "Properties": {"RequiresSession": True}}],
        },
        {
            "Name": "t",
            "Properties": {},
            "Subscriptions": [
                {"Name": "all", "Properties": {}},
                {
                    "Name": "sql",
                    "Properties": {},
                    "Rules": [
                        {
                            "Name": "red-and-big",
                            "Properties": {
                                "FilterType": "Sql",
                                "SqlFilter": {"SqlExpression": "color = 'red' AND size > 3"},
                            },
                        }
                    ],
                },
                {
                    "Name": "corr",
                    "Properties": {},
                    "Rules": [
                        {
                            "Name": "eu-orders",
                            "Properties": {
                                "FilterType": "Correlation",
                                "CorrelationFilter": {"Label": "order", "Properties": {"region": "eu"}},
                            },
                        }
                    ],
                },
            ],
        },
    ],
)


@contextmanager
def entity_keys_emulator() -> Iterator[Emulator]:
    """The suite's emulator with two keys of queue q's own (policies with an ``EntityPath``), as
    analysts are often given them: "reader" may only Listen, "writer" may only Send."""
    with Emulator(TEST_TOPOLOGY) as emu:
        emu.add_policy("reader", ["Listen"], "q")
        emu.add_policy("writer", ["Send"], "q")
        yield emu
        close_all()  # the live connections this test opened, before their broker goes away


# The SDK checks a lock against this machine's clock before it settles a message (and a session's
# before every call), without asking the broker. A manual clock started at real now falls behind the
# machine's at once: on a loaded machine a 2 s session lock taken at the clock's start had passed by the
# machine's clock before the first receive (the SDK's own SessionLockLostError). A test marked
# ``manual_clock_ahead`` that settles on a short lock gets a manual clock an hour ahead, so only
# advance() ends a lock. Not for the kit's own renewal: it renews by the machine's clock too.
MANUAL_CLOCK_LEAD = 3600.0


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """A fresh emulator on the suite's topology, on the manual clock when the test is marked
    ``servicebus_clock("manual")``. A module marked ``servicebus_topology`` runs on the kit's own
    pytest plugin instead (docs/testing.md): the test's namespace on the plugin's emulator."""
    if request.node.get_closest_marker("servicebus_topology") is not None:
        yield request.getfixturevalue("servicebus_emulator")
        return
    clock: str | ManualClock | None = None
    marker = request.node.get_closest_marker("servicebus_clock")  # the plugin's marker: "manual" (tests/waiting.py)
    if marker is not None:
        clock = marker.args[0]
    if request.node.get_closest_marker("manual_clock_ahead") is not None:
        assert clock == "manual", "manual_clock_ahead goes with servicebus_clock('manual')"
        clock = ManualClock(time.time() + MANUAL_CLOCK_LEAD)
    with Emulator(TEST_TOPOLOGY, clock=clock) as emu:
        yield emu
        close_all()  # the live connections this test opened, before their broker goes away


@pytest.fixture
def client(emulator: Emulator) -> Iterator[ServiceBusClient]:
    with QuickCloseClient.from_connection_string(emulator.connection_string) as c:
        yield c


@pytest.fixture
def quick_client(emulator: Emulator) -> Iterator[ServiceBusClient]:
    """A client that does not retry (``retry_total=0``), for tests that expect an error: it arrives
    at once instead of after the SDK's own backoff (about 10 s for a not-found)."""
    with QuickCloseClient.from_connection_string(emulator.connection_string, retry_total=0) as c:
        yield c


@pytest.fixture
def admin(emulator: Emulator) -> Iterator[ServiceBusAdministrationClient]:
    """The SDK's administration client on the test's emulator (plain HTTP, ``core.admin``)."""
    with emulator_admin_client(emulator.connection_string) as a:
        yield a


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A local Spark session for a test module: one per process, shared by the modules that ask for it
    one after another (tests/xdist_groups.py runs a JVM group's files on one worker), since each new
    session starts its own Python worker daemons and planner workers (about 7, 0.6-0.8 s of CPU each:
    docs/benchmarks.md, "The suite's time"). What a module changes is undone after it: its streams
    stopped, the SQL settings it set put back. A module that needs a session of its own (other
    settings, another master, Connect) stops this one first (``stop_local_spark``). Imported here only
    when a test asks for it. Without Java it skips, or under CI fails, in one line (tests/required.py)
    instead of a JVM error."""
    from sbnotebook import spark as sbspark

    require_tool("java")

    session = sbspark.local_session(f"sbnotebook-{request.module.__name__.rsplit('.', 1)[-1]}")
    settings = dict(session.conf.getAll)
    yield session
    for query in session.streams.active:
        query.stop()
    for key, value in dict(session.conf.getAll).items():
        if key not in settings:
            session.conf.unset(key)
        elif value != settings[key]:
            session.conf.set(key, settings[key])


@pytest.fixture(scope="session", autouse=True)
def _local_spark_stopped_at_the_end() -> Iterator[None]:
    """The shared local session (``spark``) is stopped when the process's tests are done."""
    yield
    if "pyspark" in sys.modules:
        stop_local_spark()


def stop_local_spark() -> None:
    """Stop the shared local session (``spark``), if one is running: for a module whose session must be
    its own (``getOrCreate`` would hand it the running one, its settings unapplied)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
