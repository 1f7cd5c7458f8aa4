"""The ``servicebus_clock`` marker: which clock the test's emulator runs on.

    @pytest.mark.servicebus_clock("manual")   # time moves only with servicebus_emulator.advance(...)

Without it the emulator runs on the system clock, as before. Under ``--servicebus-live`` a test
with the manual clock is skipped: Service Bus's clock cannot be moved.
"""

from __future__ import annotations

from typing import Any

import pytest

MARKER = "servicebus_clock"
KINDS = ("manual", "system")
LIVE_SKIP = (
    "servicebus_clock('manual') needs the embedded emulator: under --servicebus-live time is Service Bus's own "
    "and cannot be advanced"
)
LIVE_ADVANCE = (
    "advance() needs the embedded emulator with @pytest.mark.servicebus_clock('manual'); under "
    "--servicebus-live time is Service Bus's own"
)


def clock_of(node: pytest.Item) -> str:
    """``manual`` or ``system`` (no marker); a marker with anything else fails the test at setup."""
    marker = node.get_closest_marker(MARKER)
    if marker is None:
        return "system"
    given: list[Any] = [*marker.args, *marker.kwargs.values()]
    if set(marker.kwargs) - {"kind"} or len(given) != 1 or given[0] not in KINDS:
        shown = ", ".join([*map(repr, marker.args), *(f"{k}={v!r}" for k, v in marker.kwargs.items())])
        pytest.fail(f"{MARKER}({shown}): give one of {', '.join(map(repr, KINDS))}", pytrace=False)
    return str(given[0])
