"""The names the broker reads off a message for its journey are the kit's own: the emulator imports
nothing from the kit, so it keeps copies (sbnotebook/emulator/broker/noting.py), held equal here."""

from __future__ import annotations

from sbnotebook.core import tracing
from sbnotebook.core.operations import copies
from sbnotebook.emulator.broker import noting


def test_the_brokers_names_are_the_kits() -> None:
    assert noting.ORIGINAL_ID == copies.ORIGINAL_ID
    assert noting.TRACEPARENT == tracing.TRACEPARENT
    assert noting.DIAGNOSTIC_ID == tracing.DIAGNOSTIC_ID
