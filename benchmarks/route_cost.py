"""What ``core.route`` costs: 10^4 messages routed through a topic of 20 subscriptions and 50 rules
(the Done-when topic of issue 61: tests/core/topology/routed_topic.py, its rules as core reads them),
each rule compiled once, the properties read once per message, every subscription's rules evaluated
and actions applied; nothing explained (``explain=False``, as ``%sb_route --summary``), then with
why-not explanations for every subscription that does not get a message (``%sb_route``'s default).
No broker: the messages are records as an export file holds them (typed properties). Reports the
median CPU seconds of the process (``time.process_time``: on a shared machine the wall clock also
counts other work) and the wall seconds beside it.

Target (issue 61): under 2 s for the routing itself.

    python benchmarks/route_cost.py [--messages 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sbnotebook import core
from sbnotebook.core.topology.rules import rule_spec
from tests.core.topology.routed_topic import EPOCH, SUBSCRIPTIONS


class _Described:
    """A rule as the administration client hands it (what ``rule_spec`` reads)."""

    def __init__(self, name: str, flt: Any, action: str | None) -> None:
        self.name, self.filter = name, flt
        self.action = None if action is None else type("A", (), {"sql_expression": action, "parameters": {}})()


def rules() -> list[core.RuleSpec]:
    return [rule_spec(sub, _Described(*r)) for sub, rs in SUBSCRIPTIONS.items() for r in rs]


def records(n: int, seed: int = 61) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        user = {
            "region": rnd.choice(["eu", "us", "uk", "apac", "EU", "e%u"]),
            "priority": rnd.randint(-5, 10),
            "big": rnd.choice([2**30, -(2**30), 7, 12]),
            "price": round(rnd.uniform(-10, 100), 2),
            "vip": rnd.random() < 0.5,
            "placed": EPOCH,
            "ref": uuid.UUID(int=rnd.getrandbits(128)),
            "code": rnd.choice(["A-1", "B_2", "C%3", "a-1", "zz"]),
            "hr-id": rnd.randint(0, 20),
        }
        out.append(
            {
                "message_id": f"m{i}",
                "subject": rnd.choice(["order", "refund", "return", "order_eu", None]),
                "to": rnd.choice(["t1", None]),
                "reply_to": rnd.choice(["r1", None]),
                "correlation_id": rnd.choice(["c1", None]),
                "content_type": rnd.choice(["application/json", "text/plain", None]),
                "application_properties": {k: v for k, v in user.items() if rnd.random() < 0.8},
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    specs, given = rules(), records(args.messages)
    subs = len({s.subscription for s in specs})
    print(f"{args.messages} messages x {subs} subscriptions x {len(specs)} rules, {args.rounds} rounds (median)")
    for explain in (False, True):
        cpu, wall, copies = [], [], 0
        for _ in range(args.rounds):
            start, started = time.process_time(), time.perf_counter()
            result = core.route("bench", given, rules=specs, explain=explain)
            cpu.append(time.process_time() - start)
            wall.append(time.perf_counter() - started)
            copies = sum(len(r.deliveries) for r in result.routed)
        label = "with why-not" if explain else "routing only"
        rounds = ", ".join(f"{t:.2f}" for t in cpu)
        print(
            f"{label:<13} CPU {statistics.median(cpu):5.2f} s  wall {statistics.median(wall):5.2f} s  "
            f"({copies} copies; CPU per round: {rounds})"
        )


if __name__ == "__main__":
    main()
