"""The brake and the canary of a glob's copy (``copy_many``) across its entities. Each entity's copy
is one ``acopy`` with one copy's brake and canary (``brake.py``, ``canary.py``), given what is left
of the run's: nothing here watches or reads the broker itself.

The brake: each entity's copy watches its own target (or the ``watch`` entities) from its own first
reading; what came back is counted across the run (this call), each entity's read once more when its
copy ends (``report.stats["came_back"]``), and the next entity's copy is given the brake with its
``stop_if_dead_letters`` less what came back before it. What reaches an earlier entity's target after
its copy's last reading is not counted (name it in ``watch`` to count it). ``stop_if_active`` is each
copy's own (a backlog).
The canary: K copies in total, from the entities in order (the first not copied in full gives what it
has, up to K, then the next) with each entity's fate read at its target by its copy; the run's is
their sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...outcome import Report
from ..brake import BRAKED, Brake, braked
from ..canary import Canary, CanaryFate

AGAIN = "the same call again continues from where it stopped (the entities copied in full are not read, nothing twice)"


@dataclass
class GlobStops:
    """What a glob's copy has spent of its brake (``brake``: its ``stop_if_dead_letters``) and canary
    (``canary``) so far, and where it stopped (``at``: the entity after which nothing more was begun)."""

    brake: Brake | None
    canary: Canary | None
    came_back: int = 0
    canaried: int = 0  # copies the canary made
    fates: list[CanaryFate] = field(default_factory=list)
    at: str | None = None
    braked: bool = False

    @property
    def dead_letters(self) -> int | None:
        return None if self.brake is None else self.brake.stop_if_dead_letters

    def left(self) -> dict[str, Any]:
        """The next entity's ``brake`` and ``canary``: what is left of the run's (its other settings
        as they are)."""
        left: dict[str, Any] = {"brake": self.brake, "canary": self.canary}
        if self.brake is not None and self.dead_letters is not None:
            left["brake"] = replace(self.brake, stop_if_dead_letters=self.dead_letters - self.came_back)
        if self.canary is not None:
            left["canary"] = replace(self.canary, size=self.canary.size - self.canaried)
        return left

    def stops_after(self, part: Report, entity: str) -> bool:
        """``part`` (an entity's copy) counted into the run; whether the glob stops after it: its
        brake fired, or what came back by its end reached ``dead_letters``, or the canary is spent."""
        self.came_back += int(part.stats.get("came_back", 0))
        if self.canary is not None:
            self.canaried += part.count("sent")
            fate = CanaryFate.of(part)
            if fate is not None:
                self.fates.append(fate)
        self.braked = braked(part) or (self.dead_letters is not None and self.came_back >= self.dead_letters)
        if self.braked or (self.canary is not None and self.canaried >= self.canary.size):
            self.at = entity
        return self.at is not None

    def said(self, report: Report, *, complete: bool) -> None:
        """The glob's Report: what came back in the run; braked, which entity stopped it and how to
        go on (the error of the part that braked says its own counts, with the run's limit); after a
        canary, the fate of its copies summed over the entities (``complete``: nothing was left)."""
        if self.dead_letters is not None:
            report.stats["came_back"] = self.came_back
        if self.braked:
            limit = f"stop_if_dead_letters={self.dead_letters}"
            part = next((p for p in report.parts if braked(p)), None)
            if part is not None:  # its limit was what was left of the run's: said as the run's
                mine = part.stats.get("came_back", 0)
                part.errors[:] = [e for e in part.errors if not e.startswith(BRAKED)] + [
                    f"{BRAKED}: {mine} came back while it ran, {self.came_back} in the run ({limit}); "
                    f"{part.count('sent')} copied; the rest of it is still in {part.entity}"
                ]
            report.errors[:] = [e for e in report.errors if not e.startswith(BRAKED)]
            copied = report.count("sent")
            report.error(
                f"{BRAKED}: at {self.at}, {self.came_back} came back ({limit}); {copied} copied, "
                f"{self.came_back} came back; the entities after it not begun: {AGAIN}"
            )
        if self.canary is not None:
            rest = "the same call again without canary copies the rest" if not complete else "nothing was left to copy"
            CanaryFate.summed(self.fates).said(report, f" (over the entities); nothing more copied: {rest}")
