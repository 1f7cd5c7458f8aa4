"""A playbook run: its plan made (one scan), then each entity's rules in order, each through the
kit's own operation with its guarantees, every outcome the broker confirmed written to the audit.

- ``resubmit`` and ``park`` are ``core.resubmit`` (copy first, complete second; rate, canary, brake),
  ``discard`` is ``core.discard``; each selects exactly its rule's messages (``where``: the first rule
  the message matches is this one, and it is not a copy of one a run moved before), so a message is
  handled by one rule, once. ``keep`` touches nothing and writes its rows.
- A brake or a canary stops the run (``STOPPED_EXIT``), an interrupt too (``INTERRUPTED_EXIT``): the
  step under way ends as the operation's own interrupt does (no message in two places), its planned
  messages not reached are written ``stopped before``, and the run's state
  (``AUDIT/NAME.unfinished.json``) keeps the steps done. ``resume=True`` goes on with the same run id
  and the same ``now``: done steps are not run again, a canary already flown is not flown again, and
  what a step moved is no longer there to move. A crash leaves the same state; the operation's own
  record completes an original whose copy was sent (``resubmit/progress.py``).
- Every word is counted: the summary's figures are the audit rows this invocation wrote, each from an
  outcome the broker confirmed.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ...connections.interrupts import interrupted
from ...connections.live import LiveConnection
from ...connections.registry import ConnectionLike
from ...entities import EntityPath
from ...errors import InvalidInputError
from ...operations.copies import copy_id
from ...outcome import Outcome, Report
from ..brake import braked
from ..canary import CanaryFate
from ..resubmit.api import resubmit
from ..resubmit.discard import discard
from .audit import MOVED, AuditWriter, moved_before, to_parquet
from .planning import CAME_BACK, Plan, Planned, came_back, connection_of, plan
from .schema import Playbook, PlaybookError, Rule
from .selection import Seen, Selector, first_rule, selector

DONE_EXIT, FAILED_EXIT, BAD_PLAYBOOK_EXIT, STOPPED_EXIT, INTERRUPTED_EXIT = 0, 1, 2, 3, 130
# None: moved or parked. A "left" one (selected, still there untouched) is written when its step ends.
AUDITED = {"resubmitted": None, "discarded": "discarded", "duplicated": "duplicated"}
UNTOUCHED = ("skipped",)  # not this step's: no row


@dataclass
class PlaybookRun:
    """What a run did, from the audit rows it wrote (each an outcome the broker confirmed)."""

    run_id: str
    playbook: Playbook
    plan: Plan
    audit_file: Path
    counts: Counter[str] = field(default_factory=Counter)  # audit outcome -> rows written by this invocation
    stopped: str | None = None  # why it stopped before the end (the brake, a canary, an interrupt)
    errors: list[str] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.stopped is not None:
            return INTERRUPTED_EXIT if self.stopped.startswith("interrupted") else STOPPED_EXIT
        return FAILED_EXIT if self.errors or self.counts["failed"] or self.counts["duplicated"] else DONE_EXIT

    def summary(self) -> str:
        """The last line the CLI and the magic say: what happened, in counts from the broker."""
        said = ", ".join(f"{self.counts[o]:,} {o}" for o in ("moved", "parked", "discarded", "kept"))
        problems = sum(self.counts[o] for o in ("failed", "duplicated"))
        head = f"Playbook {self.playbook.name} run {self.run_id}: {said}"
        head += f", {problems:,} failed" if problems else ""
        if self.stopped is not None:
            return f"{head}; {self.stopped}: the same command with --resume goes on (nothing moved twice)."
        if self.errors:
            return f"{head}; failed: {'; '.join(self.errors)}"
        handled = sum(self.counts[o] for o in ("moved", "parked", "discarded"))
        return f"{head}; done{' (nothing to move)' if handled == 0 else ''}."

    def __repr__(self) -> str:
        return self.summary()


def state_path(playbook: Playbook) -> Path:
    """Where an unfinished run of ``playbook`` keeps its state (beside its audit)."""
    return playbook.audit / f"{playbook.name}.unfinished.json"


def _state(playbook: Playbook, resume: bool) -> dict[str, Any]:
    path = state_path(playbook)
    found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    if found is not None and not resume:
        raise PlaybookError(
            f"Run {found['run_id']} of playbook {playbook.name} did not finish ({found.get('stopped') or 'a crash'}): "
            "run it with --resume (resume=True) to go on, nothing moved twice."
        )
    if found is None and resume:
        raise InvalidInputError(f"Nothing to resume: every run of playbook {playbook.name} finished.")
    if found is None:
        now = dt.datetime.now(dt.UTC)
        run_id = f"{playbook.name}-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"  # two runs in one second: two ids
        found = {"run_id": run_id, "now": now.isoformat(), "done": [], "flown": []}
    return found


def _save(playbook: Playbook, state: dict[str, Any]) -> None:
    path = state_path(playbook)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(state), encoding="utf-8")
    partial.replace(path)


def run(
    playbook: Playbook,
    *,
    resume: bool = False,
    connection: ConnectionLike = None,
    progress: Callable[[str], None] | None = None,
) -> PlaybookRun:
    """Run ``playbook`` (the module docstring): plan, then each step, the audit written as the broker
    confirms. ``resume``: go on with an unfinished run. ``progress(line)``: one line per step begun."""
    state = _state(playbook, resume)
    conn = connection_of(playbook, connection)
    now = dt.datetime.fromisoformat(state["now"])
    made = plan(playbook, connection=conn, now=now)
    writer = AuditWriter(playbook.audit / f"{state['run_id']}.jsonl", state["run_id"], playbook.name)
    result = PlaybookRun(state["run_id"], playbook, made, writer.path)
    _save(playbook, state)
    try:
        _steps(playbook, made, conn, state, writer, result, progress)
    finally:
        writer.close()
    if result.stopped is None:
        state_path(playbook).unlink(missing_ok=True)
        if playbook.format == "parquet":
            result.audit_file = to_parquet(writer.path)
    else:
        state["stopped"] = result.stopped
        _save(playbook, state)
    return result


def _steps(
    playbook: Playbook,
    made: Plan,
    conn: LiveConnection,
    state: dict[str, Any],
    writer: AuditWriter,
    result: PlaybookRun,
    progress: Callable[[str], None] | None,
) -> None:
    selectors = [selector(rule, made.now) for rule in playbook.rules]
    moved = moved_before(playbook.audit)  # this run's earlier rows too, when resumed
    planned: dict[tuple[str, str], list[Planned]] = {}
    for m in made.messages:
        planned.setdefault((m.entity, m.rule), []).append(m)
    for entity in made.entities:
        for m in planned.get((entity, CAME_BACK), []) if [entity, CAME_BACK] not in state["done"] else []:
            _row(writer, result, m, "keep", "kept", note="came back after a run moved it: left for a person")
        state["done"].append([entity, CAME_BACK])
        for rule in playbook.rules:
            if [entity, rule.name] in state["done"]:
                continue
            these = planned.get((entity, rule.name), [])
            if these and progress is not None:
                progress(f"{rule.name}: {rule.do} {len(these):,} from {entity}")
            if these and rule.do == "keep":
                for m in these:
                    _row(writer, result, m, "keep", "kept")
            elif these:
                step = Step(rule, entity, made.targets.get((entity, rule.name)), selectors, moved, writer, result)
                if not step.run(conn, flown=[entity, rule.name] in state["flown"], state=state):
                    step.stopped_before(these)
                    return
            state["done"].append([entity, rule.name])
            _save(playbook, state)


def _row(writer: AuditWriter, result: PlaybookRun, m: Planned, action: str, outcome: str, **more: Any) -> None:
    writer.row(rule=m.rule, entity=m.entity, sequence_number=m.sequence_number, message_id=m.message_id,
               signature=m.signature, action=action, outcome=outcome, **more)  # fmt: skip
    result.counts[outcome] += 1


@dataclass
class Step:
    """One rule over one dead-letter queue, through its operation, each outcome audited."""

    rule: Rule
    entity: str
    target: str | None
    selectors: list[Selector]
    moved: set[str]  # the originals moved by this playbook's runs: their copies are never moved again
    writer: AuditWriter
    result: PlaybookRun
    seen: dict[int, tuple[str | None, str | None, str | None]] = field(
        default_factory=dict
    )  # seq -> (id, sig, copy id)
    acted: set[int] = field(default_factory=set)
    left: list[Outcome] = field(default_factory=list)  # selected, still there untouched

    def mine(self, record: dict[str, Any]) -> bool:
        """Whether this step handles ``record``: its first matching rule is this one, and it is not a
        copy of a message a run moved."""
        seen = Seen(record)
        if came_back(record, self.moved) or first_rule(self.selectors, seen) is not self.rule:
            return False
        seq, original = int(record["sequence_number"]), record.get("message_id")
        # The copy's id, as the resubmit derives it (Service Bus tells a sender no sequence number)
        as_sent = SimpleNamespace(application_properties=record.get("application_properties"), sequence_number=seq)
        copy = copy_id(as_sent, str(EntityPath.parse(self.entity)), original) if self.rule.moves else None
        self.seen[seq] = (original, seen.signature, copy)
        return True

    def outcome(self, o: Outcome) -> None:
        """An outcome the broker confirmed, as its audit row (a selection's ``skipped`` is none)."""
        if o.sequence_number is None or o.outcome in UNTOUCHED:
            return
        if o.outcome == "left":  # written once the step ends: "stopped before" if a brake stopped it
            self.left.append(o)
            return
        done = AUDITED.get(o.outcome, "failed")
        if done is None:
            done = "parked" if self.rule.do == "park" else "moved"
        self._row(o, done)

    def _row(self, o: Outcome, done: str) -> None:
        seq = int(o.sequence_number or 0)
        message_id, sig, copy = self.seen.get(seq, (None, None, None))
        if done in MOVED and message_id is not None:
            self.moved.add(str(message_id))
        self.writer.row(rule=self.rule.name, entity=self.entity, sequence_number=seq,
                        message_id=message_id if done != "discarded" else o.message_id, signature=sig,
                        action=self.rule.do, outcome=done, target=self.target,
                        copy_message_id=copy if done in MOVED else None,
                        note=o.error)  # fmt: skip
        self.result.counts[done] += 1
        self.acted.add(seq)

    def run(self, conn: LiveConnection, *, flown: bool, state: dict[str, Any]) -> bool:
        """The step through its operation; False when it stopped the run (``result.stopped`` says why).
        What the operation could not do (a message "left": locked by another receiver) is an error of
        the run (exit code 1); the messages stay dead-lettered for the next run."""
        report = self._operation(conn, flown=flown, state=state)
        if self.result.stopped is None:
            for o in self.left:
                self._row(o, "left")
        if not report.ok and self.result.stopped is None:
            where = f"rule {self.rule.name} at {self.entity}"
            self.result.errors += [f"{where}: {e}" for e in report.errors] or [f"{where}: {report!r}"]
        return self.result.stopped is None

    def _operation(self, conn: LiveConnection, *, flown: bool, state: dict[str, Any]) -> Report:
        if self.rule.do == "discard":
            report = discard(self.entity, where=self.mine, on_outcome=self.outcome, connection=conn)
        else:
            canary = None if flown else self.rule.canary
            report = resubmit(self.entity, target=self.target, where=self.mine, edit=self.rule.edit,
                              brake=self.rule.brake, canary=canary, on_outcome=self.outcome, connection=conn,
                              **self.rule.options)  # fmt: skip
            if canary is not None:
                state["flown"].append([self.entity, self.rule.name])
        self.result.reports.append(report)
        where = f"rule {self.rule.name} at {self.entity}"
        if interrupted(report):
            self.result.stopped = f"interrupted in {where}"
        elif braked(report):
            self.result.stopped = f"stopped by the brake in {where}"
        elif (fate := CanaryFate.of(report)) is not None and report.count("resubmitted") < len(self.seen):
            self.result.stopped = f"after the canary in {where} ({fate})"
        return report

    def stopped_before(self, planned: list[Planned]) -> None:
        """The step's planned messages the operation did not reach, written ``stopped before``."""
        for m in planned:
            if m.sequence_number not in self.acted:
                _row(self.writer, self.result, m, self.rule.do, "stopped before", target=self.target)
