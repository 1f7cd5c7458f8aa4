"""What stops a run on its own, as the functions that move messages take it: ``brake=`` (a
``Brake``) and ``canary=`` (a ``Canary``), one keyword each, and their six old keywords gathered into
them for one release (``renames.gathered``: each said once, with what replaced it)."""

from __future__ import annotations

from typing import Any

from .brake import OLD_KEYWORDS as BRAKE_OLD
from .brake import brake_of
from .canary import OLD_KEYWORDS as CANARY_OLD
from .canary import canary_of

STOPS_GATHERED: dict[str, tuple[tuple[str, ...], Any, type | None]] = {
    "brake": (BRAKE_OLD, brake_of, None),
    "canary": (CANARY_OLD, canary_of, int),  # canary=20, a number: the old form of Canary(20)
}
