"""Shared fixtures: a fresh embedded emulator per test, with second-scale durations.

(Timeouts and hang diagnostics for the whole suite, tutorials included, are in the repository's
root ``conftest.py``.)"""

from __future__ import annotations

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
    """A local Spark session for one test module, stopped after it (the cluster and Connect modules
    change PySpark's process-wide state in between). Imported here only when a test asks for it.
    Without Java it skips, or under CI fails, in one line (tests/required.py) instead of a JVM error."""
    from sbnotebook import spark as sbspark

    require_tool("java")

    session = sbspark.local_session(f"sbnotebook-{request.module.__name__.rsplit('.', 1)[-1]}")
    yield session
    session.stop()
