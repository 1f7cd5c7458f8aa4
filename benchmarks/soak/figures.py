"""The chaos soak's figures: the totals it prints and the verdict (``ok``) they give."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Figures:
    messages: int = 0  # sends attempted
    acknowledged: int = 0
    send_failures: int = 0  # sends reported failed (may or may not have arrived)
    completed: int = 0
    dead_lettered: int = 0  # in the dead-letter queue at the end
    still_there: int = 0
    deferred_fetched: int = 0
    resubmitted: int = 0
    purged: int = 0
    spark_read: int = 0  # deferred by Spark reads
    spark_settled: int = 0  # of those, completed by spark.settle
    spark_written: int = 0  # acknowledged sends by spark.write
    settle_failures: int = 0  # per-message settlement outcomes that reported a failure (lock lost, ...)
    operation_errors: int = 0  # whole operations that raised one of the kit's errors
    faults_injected: int = 0
    restarts: int = 0
    reconnects: int = 0
    lost: int = 0
    duplicates: int = 0  # a message present more than once without a reported reason
    completed_twice: int = 0
    mismatched: int = 0  # a Report's last word on a message that the broker's state contradicts
    checked: int = 0  # messages whose last reported outcome was compared with the broker's state
    # acknowledged messages whose last word cannot be checked: a settlement or operation reported a
    # failure that may or may not have applied (they still count in lost and duplicates)
    unchecked: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # the kit's errors, by operation and text
    slowest: list[tuple[float, str]] = field(default_factory=list)  # (seconds, operation), the slowest calls
    unreported: list[str] = field(default_factory=list)  # failures that were not the kit's errors
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        spark = (
            f"spark_read={self.spark_read} spark_settled={self.spark_settled} spark_written={self.spark_written} "
            if self.spark_read or self.spark_written
            else ""
        )
        return (
            f"messages={self.messages} acknowledged={self.acknowledged} completed={self.completed} "
            f"dead_lettered={self.dead_lettered} still_there={self.still_there} "
            f"deferred_fetched={self.deferred_fetched} resubmitted={self.resubmitted} purged={self.purged} {spark}"
            f"settle_failures={self.settle_failures} operation_errors={self.operation_errors} "
            f"faults_injected={self.faults_injected} restarts={self.restarts} reconnects={self.reconnects} "
            f"lost={self.lost} duplicates={self.duplicates} completed_twice={self.completed_twice} "
            f"checked={self.checked} unchecked={self.unchecked} mismatched={self.mismatched} "
            f"unreported={len(self.unreported)}"
        )

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicates or self.completed_twice or self.mismatched or self.unreported or self.problems
        )
