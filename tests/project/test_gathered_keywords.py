"""The brake's and the canary's old keywords (docs/names.md, "Old names": their new name ``brake`` or
``canary``) gathered into one value each (issue 72): every place the table names takes each of them
(``__renamed__``), a call with them does what the call with the value does, read from the broker,
says once what replaced it, and an old keyword beside a value is refused."""

from __future__ import annotations

from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.renames import typed_as
from sbnotebook.emulator import Emulator
from tests.project.oldnames import once, rows, said
from tests.project.test_old_keywords import GATHERED, _function

__all__ = ["said"]  # the fixture, for pytest

FOLDED = [r for r in rows(lambda row: row[2].strip("`") in GATHERED)]


def test_the_table_names_the_six_old_keywords_at_each_function_that_moves_messages() -> None:
    olds = {old for old, _, _ in FOLDED}
    assert olds == {"stop_if_dead_letters", "stop_if_active", "watch", "watch_interval", "canary_timeout"}
    assert len({place for _, place, _ in FOLDED}) == 8  # copy, copy_many, resubmit, their async forms, records


@pytest.mark.parametrize(("old", "place", "new"), FOLDED, ids=[f"{o} in {p}" for o, p, _ in FOLDED])
def test_each_place_takes_the_old_keyword_as_its_value(old: str, place: str, new: str) -> None:
    assert getattr(_function(place), "__renamed__", {}).get(old) == new, f"{place} does not take {old}= as {new}="


def _copied(emulator: Emulator, **stops: Any) -> tuple[int, dict[str, int] | None]:
    """A copy of q to dl-target with ``stops``: what it copied and its canary's fate, with the broker's
    count of dl-target's messages (then emptied for the next call)."""
    cs = emulator.connection_string
    report = core.copy("q", "dl-target", resume=False, connection=cs, **stops)
    fate = core.CanaryFate.of(report)
    assert emulator.broker.counts("dl-target")["active"] == report.count("sent")
    core.purge("dl-target", connection=cs)
    return report.count("sent"), None if fate is None else {"moved": fate.moved, "waiting": fate.waiting}


def test_an_old_call_does_what_the_call_with_the_values_does(emulator: Emulator, said: Any) -> None:
    core.send("q", [f"m{i}" for i in range(5)], connection=emulator.connection_string)
    as_new = _copied(emulator, canary=core.Canary(2, canary_timeout=0.2), brake=core.Brake(stop_if_active=1000))
    assert as_new == (2, {"moved": 2, "waiting": 2})  # nobody takes them at dl-target: still waiting
    as_old = _copied(emulator, canary=2, canary_timeout=0.2, stop_if_active=1000, watch_interval=0.5)
    assert as_old == as_new
    _copied(emulator, canary=2, canary_timeout=0.2, stop_if_active=1000)  # said once per process
    where = typed_as(core.copy)
    once(said, f"{where}(canary_timeout=)", "canary=")
    once(said, f"{where}(stop_if_active=)", "brake=")
    once(said, f"{where}(canary=N)", "canary=Canary(N)")
    assert _copied(emulator) == (5, None)  # without them: everything, no fate


def test_an_old_keyword_beside_its_value_is_refused(emulator: Emulator) -> None:
    cs = emulator.connection_string
    with pytest.raises(TypeError, match="not also stop_if_dead_letters="):
        core.resubmit(
            "q", target="dl-target", brake=core.Brake(stop_if_active=1), stop_if_dead_letters=3, connection=cs
        )
    with pytest.raises(TypeError, match="not also canary_timeout="):
        core.copy("q", "dl-target", canary=core.Canary(1), canary_timeout=3, connection=cs)
    assert emulator.broker.counts("dl-target")["active"] == 0
