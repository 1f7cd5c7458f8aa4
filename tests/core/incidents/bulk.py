"""The namespace the resumable bulk tests (test_resumable_bulk.py, test_resumable_copy.py) run against, and
the ``emulator`` fixture that serves it (a test module takes it with ``emulator = bulk.emulator``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.emulator import Emulator

TOPOLOGY: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "bulk",
                "Queues": [
                    # Messages expire into the DLQ a second after they are sent: a full DLQ in one send.
                    # A 2 s lock: what a killed run held comes back soon (it stays locked until then).
                    {
                        "Name": "src",
                        "Properties": {
                            "DefaultMessageTimeToLive": "PT1S",
                            "DeadLetteringOnMessageExpiration": True,
                            "LockDuration": "PT2S",
                        },
                    },
                    {
                        "Name": "dst",
                        "Properties": {
                            "RequiresDuplicateDetection": True,
                            "DuplicateDetectionHistoryTimeWindow": "PT10M",
                        },
                    },
                    {"Name": "plain", "Properties": {}},
                    {"Name": "sessions", "Properties": {"RequiresSession": True}},
                ],
            }
        ]
    }
}


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(TOPOLOGY) as emu:
        yield emu
        core.close_all()
