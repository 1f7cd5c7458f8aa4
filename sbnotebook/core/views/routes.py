"""What ``core.route`` answers (``RouteResult``): for each message and subscription, the copies it
gets and why not; as rows, a DataFrame, a summary of counts per subscription, and lines to read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .routing import Routed, shown

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

    def for_message(self, index: int) -> list[Routed]:
        return [r for r in self.routed if r.message == index]

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
        """One row per message, subscription and copy (a subscription it does not get: one row, why not)."""
        out: list[dict[str, Any]] = []
        for r in self.routed:
            base = {
                "message": r.message,
                "message_id": r.message_id,
                "sequence_number": r.sequence_number,
                "subscription": r.subscription,
                "matched": r.matched,
            }
            if not r.matched:
                out.append({**base, "rule": None, "properties": None, "why_not": " | ".join(r.why_not)})
            for d in r.deliveries:
                props = {k: shown(v) for k, v in d.application_properties.items()}
                props.update({f"sys.{k}": shown(v) for k, v in d.system_properties.items()})
                out.append({**base, "rule": d.rule or "*", "properties": props, "why_not": None})
        return out

    def to_pandas(self) -> Any:
        import pandas as pd

        columns = [
            "message",
            "message_id",
            "sequence_number",
            "subscription",
            "matched",
            "rule",
            "properties",
            "why_not",
        ]
        return pd.DataFrame(self.rows(), columns=columns)

    def lines(self) -> list[str]:
        """Per message: the subscriptions that get it (by which rules) and those that do not, why."""
        out: list[str] = []
        for index in range(self.messages):
            entries = self.for_message(index)
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
