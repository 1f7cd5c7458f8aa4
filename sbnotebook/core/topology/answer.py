"""What ``core.route`` answers (``RouteResult``): for each message and subscription, the copies it
gets and why not; as rows, a DataFrame, a summary of counts per subscription, and lines to read."""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .evaluator import Routed, json_form, type_name

T = TypeVar("T")
COLUMNS = ["message", "message_id", "sequence_number", "subscription", "matched", "rule", "properties", "why_not"]


@dataclass
class RouteResult:
    """``routed``: one entry per message and subscription, messages in the order read, subscriptions
    in the topic's order; ``subscriptions`` that order; ``messages`` how many were routed; ``source``
    and ``rules_from`` what was read (for the lines)."""

    topic: str
    subscriptions: list[str]
    routed: list[Routed] = field(default_factory=list)
    messages: int = 0
    source: str = ""
    rules_from: str = ""
    _grouped: tuple[int, dict[int, list[Routed]]] | None = field(default=None, repr=False, compare=False)

    def for_message(self, index: int) -> list[Routed]:
        return self._by_message().get(index, [])

    def _by_message(self) -> dict[int, list[Routed]]:
        """Each message's entries, grouped once (``routed`` holds a message's entries together, in
        order); grouped again when ``routed`` has grown since."""
        if self._grouped is None or self._grouped[0] != len(self.routed):
            groups: dict[int, list[Routed]] = {}
            for r in self.routed:
                groups.setdefault(r.message, []).append(r)
            self._grouped = (len(self.routed), groups)
        return self._grouped[1]

    def delivered(self, subscription: str) -> list[Routed]:
        """The messages (with their copies) ``subscription`` gets, in order."""
        return [r for r in self.routed if r.subscription == subscription and r.matched]

    def summary(self) -> dict[str, int]:
        """Copies per subscription (an acting rule's copy counts as one more), and ``(nowhere)``:
        messages no subscription gets."""
        copies: Counter[str] = Counter({s: 0 for s in self.subscriptions})
        reached: set[int] = set()
        for r in self.routed:
            copies[r.subscription] += len(r.deliveries)
            if r.matched:
                reached.add(r.message)
        out = dict(copies)
        out["(nowhere)"] = self.messages - len(reached)
        return out

    def summary_lines(self) -> list[str]:
        """``--summary``: where these messages would go if sent to the topic."""
        counts = self.summary()
        nowhere = counts.pop("(nowhere)")
        width = max([len(s) for s in counts] + [10])
        lines = [f"{self.messages:,} messages from {self.source} sent to {self.topic} ({self.rules_from}) would give:"]
        lines += [f"  {name:<{width}}  {n:,} {'copy' if n == 1 else 'copies'}" for name, n in counts.items()]
        lines.append(
            f"  {'(nowhere)':<{width}}  {nowhere:,} {'message' if nowhere == 1 else 'messages'} no subscription gets"
        )
        return lines

    def rows(self) -> list[dict[str, Any]]:
        """One row per message, subscription and copy (a subscription it does not get: one row, why
        not). A copy's ``properties`` keep the types the broker would deliver them with (an int, a
        float, a bool, None, text, a datetime, ...); ``sys.`` ones by that prefix."""
        columns = self._columns()
        return [dict(zip(COLUMNS, values, strict=True)) for values in zip(*columns.values(), strict=True)]

    def to_pandas(self) -> Any:
        """``rows()`` as a DataFrame, built column by column (10^4 messages x 20 subscriptions are
        200,000 rows: a dict each cost more than the routing)."""
        import pandas as pd

        return pd.DataFrame(without_cyclic_gc(self._columns), columns=COLUMNS)

    def _columns(self) -> dict[str, list[Any]]:
        """The rows' values, one list per column of ``COLUMNS``."""
        columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        message, message_id, sequence_number, subscription, matched, rule, properties, why_not = columns.values()
        prefixed = _Prefixed()
        for r in self.routed:
            for d in r.deliveries or (None,):
                message.append(r.message)
                message_id.append(r.message_id)
                sequence_number.append(r.sequence_number)
                subscription.append(r.subscription)
                if d is None:
                    matched.append(False)
                    rule.append(None)
                    properties.append(None)
                    why_not.append(" | ".join(r.why_not))
                else:
                    matched.append(True)
                    rule.append(d.rule or "*")
                    # A dict of its own per row (the prefixed sys. ones are shared within a message)
                    properties.append({**d.application_properties, **prefixed(d.system_properties)})
                    why_not.append(None)
        return columns

    def to_jsonl(self, path: str | Path) -> int:
        """The rows as JSON lines; each copy's properties in the export's typed form
        (``property_types`` beside them: ``long``, ``double``, ``boolean``, ``null``, ``string``,
        ``timestamp``, ...: ``routing.type_name``), so that a reader can tell them apart as the broker
        would deliver them. Returns how many lines."""
        n = 0
        with Path(path).open("w", encoding="utf-8") as f:
            for row in self.rows():
                props = row["properties"]
                if props is not None:
                    row["properties"] = {k: json_form(v) for k, v in props.items()}
                    row["property_types"] = {k: type_name(v) for k, v in props.items()}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        return n

    def lines(self, max_messages: int | None = None) -> list[str]:
        """Per message: the subscriptions that get it (by which rules) and those that do not, why;
        the first ``max_messages`` messages only, when given."""
        out: list[str] = []
        groups = self._by_message()
        for index in range(self.messages if max_messages is None else min(max_messages, self.messages)):
            entries = groups.get(index)
            if not entries:
                continue
            head = entries[0]
            ident = head.message_id or (f"#{head.sequence_number}" if head.sequence_number is not None else "")
            out.append(f"message {index} {ident}".rstrip() + ":")
            for r in entries:
                if r.matched:
                    out.append(f"  {r.subscription}: gets it (rules: {', '.join(r.rules)})")
                else:
                    out.append(f"  {r.subscription}: does not get it")
                    out += [f"      {reason}" for reason in r.why_not]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


class _Prefixed:
    """``sys.`` properties by that prefix, each message's worked out once: its plain copies share
    one dict of them (``routing.Delivery``), an acting rule's copy has its own."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}  # id -> (the dict, kept alive; prefixed)

    def __call__(self, system: dict[str, Any]) -> dict[str, Any]:
        found = self._seen.get(id(system))
        if found is None:
            found = self._seen[id(system)] = (system, {f"sys.{k}": v for k, v in system.items()})
        return found[1]


def without_cyclic_gc(work: Callable[[], T]) -> T:
    """``work()`` with Python's cyclic collector held off: routing 10^4 messages makes 10^5 objects
    that are all kept and none in a cycle, which the collector would walk again and again (0.4-0.7 s
    of a 1.4-1.7 s route, measured). Back on after, if it was on: nothing it could free is lost."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        return work()
    finally:
        if was_on:
            gc.enable()
