"""``/$emulator/clock`` on the administration API: the emulator's time, and its manual clock moved
from another process (``sbnotebook emulator --advance 10m``; ``--status`` reads the time).

Not a Service Bus API (``$`` names no entity, as in ``$namespaceinfo``). The caller is authorized as
for every request of the API (a token with Manage on the namespace) before this is reached.

- ``GET /$emulator/clock``: ``<Clock><Kind>manual</Kind><Now>2026-01-01T09:00:00.000000Z</Now></Clock>``
- ``POST /$emulator/clock?advance=600`` (seconds, or ``10m``): advances, then answers the same.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from ..broker.clock import span_seconds
from .atom import error_xml

CLOCK_ROOT = "$emulator"


class ClockOwner(Protocol):
    @property
    def clock_kind(self) -> str: ...

    def now(self) -> datetime: ...

    def advance(self, by: timedelta | float | str) -> datetime: ...


def clock_xml(kind: str, now: datetime) -> str:
    return f"<Clock><Kind>{kind}</Kind><Now>{now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}</Now></Clock>"


def serve_clock(
    owner: ClockOwner | None, method: str, parts: list[str], query: dict[str, list[str]]
) -> tuple[int, str]:
    """``parts``: the lower-cased path after ``$emulator``."""
    if owner is None or parts != ["clock"]:
        return 404, error_xml(404, f"Unknown resource '/{CLOCK_ROOT}/{'/'.join(parts)}'.")
    if method == "GET":
        return 200, clock_xml(owner.clock_kind, owner.now())
    if method != "POST":
        return 405, error_xml(405, "The clock takes GET (its time) and POST ?advance=DURATION.")
    given = query.get("advance", [])
    if len(given) != 1:
        return 400, error_xml(400, "POST /$emulator/clock takes one advance=DURATION (seconds, 90s, 10m, 2h, 1d).")
    try:
        seconds = span_seconds(given[0])
        now = owner.advance(seconds)
    except (ValueError, RuntimeError) as exc:  # not a duration; the system clock (ClockError)
        return 400, error_xml(400, str(exc))
    return 200, clock_xml(owner.clock_kind, now)
