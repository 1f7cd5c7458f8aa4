"""What the kit reported about each message of the soak, to hold against the broker at the end."""

from __future__ import annotations

import json
from typing import Any

from sbnotebook import core

from .figures import Figures

SETTLED_OK = {"completed", "abandoned", "dead_lettered", "deferred"}

# Where a Report's last word on a message says the broker holds it at the end.
IN_QUEUE = "in the queue"  # active (or dead-lettered by Service Bus after too many deliveries)
DEFERRED = "deferred in the queue"
DEAD = "in the dead-letter queue"
GONE = "gone"
AFTER = {"completed": GONE, "dead_lettered": DEAD, "deferred": DEFERRED, "abandoned": IN_QUEUE}


class Ledger:
    """What the kit reported, per soak id (an application property every copy keeps)."""

    def __init__(self, figures: Figures) -> None:
        self.f = figures
        self.next_sid = 0
        self.acknowledged: set[int] = set()
        self.unacknowledged: set[int] = set()  # a send reported failed: it may have arrived anyway
        self.completed: set[int] = set()
        self.uncertain: set[int] = set()  # a settlement reported failed but not "lock lost": may have applied
        self.may_repeat: set[int] = set()  # a resubmit reported a failure after its copy went out
        self.deferred: dict[int, int] = {}  # sequence number -> sid
        # sid -> (where the last report puts it, what that report said); no entry: no word that can
        # be checked (a send or settlement that failed may or may not have applied).
        self.said: dict[int, tuple[str, str]] = {}
        self.deferred_unknown = False  # a Spark read failed: it may have deferred messages unnamed

    def expect(self, sid: int, where: str | None, what: str) -> None:
        if where is None:
            self.said.pop(sid, None)
        else:
            self.said[sid] = (where, what)

    def new_messages(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            sid = self.next_sid
            self.next_sid += 1
            out.append({"body": json.dumps({"sid": sid}), "message_id": f"soak-{sid}",
                        "application_properties": {"sid": str(sid)}})  # fmt: skip
        return out

    def sent(self, items: list[dict[str, Any]], report: core.Report) -> None:
        self.f.messages += len(items)
        by_index = {o.index: o for o in report.every() if o.index is not None}
        for i, item in enumerate(items):
            sid = int(item["application_properties"]["sid"])
            o = by_index.get(i)
            if o is not None and o.outcome == "sent":
                self.acknowledged.add(sid)
                self.f.acknowledged += 1
                self.expect(sid, IN_QUEUE, "send: sent")
            else:
                self.unacknowledged.add(sid)
                self.f.send_failures += 1

    def settled(self, action: str, sids: dict[int, int], report: core.Report, *, unlocked: str = IN_QUEUE) -> None:
        """``sids``: the batch's row -> soak id of the rows settled; outcomes name their row.
        ``unlocked``: where a message whose lock was lost stays (deferred ones stay deferred)."""
        by_index = {o.index: o for o in report.every()}
        for row, sid in sids.items():
            o = by_index.get(row)
            if o is None:
                self.f.problems.append(f"{action}: no outcome for row {row} ({len(sids)} settled)")
                self.expect(sid, None, "")
                continue
            what = f"{action}: {o.outcome}"
            if o.outcome in SETTLED_OK:
                if action == "complete":
                    if sid in self.completed:
                        self.f.completed_twice += 1
                    self.completed.add(sid)
                    self.f.completed += 1
                self.uncertain.discard(sid)
                self.expect(sid, AFTER[o.outcome], what)
            elif o.outcome == "already_settled":
                continue
            else:
                self.f.settle_failures += 1
                if o.outcome != "lock_lost":
                    self.uncertain.add(sid)
                self.expect(sid, unlocked if o.outcome == "lock_lost" else None, what)

    def not_known(self, sids: Any) -> None:
        """An operation raised: what it did to these messages is not known."""
        for sid in sids:
            self.expect(sid, None, "")


def sid_of(record: dict[str, Any]) -> int:
    return int(json.loads(record["application_properties"]["sid"]) if record["application_properties"] else -1)
