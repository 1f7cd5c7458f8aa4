"""A playbook's plan: every matched dead-letter queue read once by a scan (peeks: nothing locked, no
delivery counted), each message given to the first rule it matches, and counted.

The plan says, per entity and rule, how many messages the rule would handle, a sample of them, where
resubmits to a topic would go (``core.route``'s summary, as the resubmit would send them), and how
many no rule matches; a message a playbook run moved before that came back dead-lettered (its copy
carries the original's id, ``sbnotebook-original-message-id``, found in the audit) is kept, never
moved twice. Its ``now`` is taken once: the run that follows selects with the same ages.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...connections.credentials import is_secret_ref, parse_secret_ref, read_secret
from ...connections.live import LiveConnection
from ...connections.registry import ConnectionLike, live
from ...entities import EntityPath
from ...errors import EntityNameError
from ...operations.copies import original_of
from ...operations.counts import admin_call
from ...operations.scan import scan
from ..resubmit.api import default_target
from .audit import moved_before
from .schema import Playbook, PlaybookError, Rule
from .selection import Seen, Selector, first_rule, selector

SAMPLE = 3  # messages shown per rule and entity
NO_RULE = "(no rule)"
CAME_BACK = "(came back)"


@dataclass(frozen=True)
class Planned:
    """One dead letter as the plan saw it, and what the run would do with it."""

    entity: str  # the dead-letter queue's path
    sequence_number: int
    message_id: str | None
    signature: str | None
    rule: str  # a rule's name, NO_RULE or CAME_BACK
    enqueued_time: dt.datetime | None = None


@dataclass
class Plan:
    """What a playbook would do now, in counts from the broker's messages (one scan each)."""

    playbook: Playbook
    now: dt.datetime
    entities: list[str]  # the dead-letter queues read, in order
    messages: list[Planned] = field(default_factory=list)
    targets: dict[tuple[str, str], str] = field(default_factory=dict)  # (entity, rule) -> where its copies go
    routes: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (entity, rule) -> route summary
    unevaluated: dict[str, int] = field(default_factory=dict)  # rule -> messages its where raised on
    unmoved: set[tuple[str, str]] = field(default_factory=set, repr=False)  # (entity, rule) that moves nothing

    def counts(self) -> Counter[tuple[str, str]]:
        """Messages per (entity, rule), NO_RULE and CAME_BACK included."""
        return Counter((m.entity, m.rule) for m in self.messages)

    def by_rule(self) -> Counter[str]:
        return Counter(m.rule for m in self.messages)

    def to_pandas(self) -> Any:
        """One row per dead letter read: entity, sequence number, message id, signature, rule."""
        import pandas as pd

        columns = ["entity", "sequence_number", "message_id", "signature", "rule", "enqueued_time"]
        return pd.DataFrame([{c: getattr(m, c) for c in columns} for m in self.messages], columns=columns)

    def lines(self) -> list[str]:
        """The plan as the CLI and ``%sb_playbook`` print it."""
        counts = self.counts()
        samples: dict[tuple[str, str], list[Planned]] = {}
        for m in self.messages:  # one pass: the sample of each (entity, rule), not a pass per rule
            kept = samples.setdefault((m.entity, m.rule), [])
            if len(kept) < SAMPLE:
                kept.append(m)
        out = [f"Playbook {self.playbook.name}: {len(self.messages):,} dead letters in {len(self.entities)} "
               f"dead-letter queue{'s' * (len(self.entities) != 1)} (read once, nothing locked):"]  # fmt: skip
        for entity in self.entities:
            out.append(f"  {entity}")
            for rule in self.playbook.rules:
                n = counts.get((entity, rule.name), 0)
                where = self.targets.get((entity, rule.name))
                to = f" -> {where}" if where and n else ""
                out.append(f"    {rule.name:<20} {rule.do:<9} {n:>8,}{to}")
                if rule.edit is not None and n:
                    out.append(f"        each copy edited: {rule.edit.describe()} (a body that is not JSON: unchanged)")
                for line in self.routes.get((entity, rule.name), []):
                    out.append(f"        {line}")
                for m in samples.get((entity, rule.name), []):
                    out.append(f"        #{m.sequence_number} {m.message_id}: {(m.signature or '')[:70]}")
            for special, said in ((NO_RULE, "no rule matches"), (CAME_BACK, "came back after a run moved them: kept")):
                n = counts.get((entity, special), 0)
                if n:
                    out.append(f"    {said}: {n:,}")
        for name, n in self.unevaluated.items():
            out.append(f"  rule {name!r}: its where could not be evaluated on {n:,} messages (not matched)")
        return out


def connection_of(playbook: Playbook, connection: ConnectionLike = None) -> LiveConnection:
    """The live connection a playbook runs on: ``connection`` when given, else the playbook's own
    (a secret reference read here: ``env:NAME``, ``secret:SCOPE/KEY``), else the default (the
    documented order: ``SERVICEBUS_CONNECTION_STRING``, ..., the embedded emulator)."""
    if connection is not None:
        return live(connection)
    named = playbook.connection
    if named is None:
        return live(None)
    if is_secret_ref(named):
        return live(read_secret(parse_secret_ref(named, option="connection"), option=f"{playbook.source}: connection"))
    if "sharedaccesskey" in named.lower():
        raise PlaybookError(f"{playbook.source}: connection holds a key: name it (env:NAME, secret:SCOPE/KEY) instead.")
    raise PlaybookError(
        f"{playbook.source}: connection {named!r} is a named connection, known only to a notebook that made it "
        f"(%sb_connect ... --as {named}); elsewhere name where it is: connection: env:NAME, or "
        "sbnotebook playbook ... --secret env:NAME."
    )


def dead_letter_queues(conn: LiveConnection, patterns: tuple[str, ...]) -> list[str]:
    """The dead-letter queues the playbook's entities name: a queue, a subscription, or globs of
    either (``orders-*``, ``orders-topic/subscriptions/*``), each in name order, each once. A name
    that matches nothing is refused: a playbook over a misspelt queue would say it handled 0."""
    queues = admin_call(conn, lambda admin: [str(q.name) for q in admin.list_queues()])
    found: list[str] = []
    for pattern in patterns:
        text = pattern.split("/$", 1)[0]
        topic, _, subscription = text.partition("/subscriptions/")
        if subscription:
            names = _subscriptions(conn, topic)
            hits = [f"{topic}/subscriptions/{s}" for s in sorted(names, key=str.lower) if _hit(s, subscription)]
        else:
            hits = [q for q in sorted(queues, key=str.lower) if _hit(q, text)]
        if not hits:
            raise PlaybookError(f"{pattern!r} names no queue or subscription of this namespace.")
        found += [str(EntityPath.parse(h).dead_letter) for h in hits]
    return list(dict.fromkeys(found))


def _subscriptions(conn: LiveConnection, topic: str) -> list[str]:
    return admin_call(conn, lambda admin: [str(s.name) for s in admin.list_subscriptions(topic)], topic)


def _hit(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name.lower(), pattern.lower())


def plan(
    playbook: Playbook,
    *,
    connection: ConnectionLike = None,
    now: dt.datetime | None = None,
    progress: Callable[[int], None] | None = None,
) -> Plan:
    """What ``playbook`` would do now (the module docstring): one scan per dead-letter queue, nothing
    touched. ``now``: the time its ages are taken from (default: now). ``progress(n)``: messages read."""
    conn = connection_of(playbook, connection)
    moment = now or dt.datetime.now(dt.UTC)
    selectors = [selector(rule, moment) for rule in playbook.rules]
    moved = moved_before(playbook.audit)
    result = Plan(playbook, moment, dead_letter_queues(conn, playbook.entities))
    routed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    topics = {t.lower() for t in admin_call(conn, lambda admin: [str(t.name) for t in admin.list_topics()])}
    read = 0
    for entity in result.entities:
        for page in scan(entity, connection=conn):
            for record in page:
                seen = Seen(record)
                rule = CAME_BACK if came_back(record, moved) else _rule_name(first_rule(selectors, seen))
                result.messages.append(_planned(entity, seen, rule))
                target = _target_of(playbook, entity, rule, result)
                if target is not None and target.lower() in topics:
                    routed.setdefault((entity, rule), []).append(record)
            read += len(page)
            if progress is not None:
                progress(read)
    _said_unevaluated(selectors, result)
    for (entity, rule), records in routed.items():
        result.routes[(entity, rule)] = _route_lines(conn, result.targets[(entity, rule)], records)
    return result


def _rule_name(rule: Rule | None) -> str:
    return NO_RULE if rule is None else rule.name


def came_back(record: dict[str, Any], moved: set[str]) -> bool:
    original = original_of(record)
    return original is not None and original in moved


def _planned(entity: str, seen: Seen, rule: str) -> Planned:
    record = seen.record
    return Planned(entity, int(record["sequence_number"]), record.get("message_id"), seen.signature, rule,
                   record.get("enqueued_time"))  # fmt: skip


def target_of(playbook: Playbook, entity: str, rule_name: str) -> str | None:
    """Where a rule's copies from ``entity`` (a dead-letter queue) go: its ``target`` / ``to``, else
    the entity itself for a resubmit (a subscription's needs a target: ``default_target`` says why);
    None for a rule that moves nothing."""
    if rule_name in (NO_RULE, CAME_BACK):
        return None
    rule = playbook.rule(rule_name)
    if not rule.moves:
        return None
    if rule.target is not None:
        return rule.target
    try:
        return str(default_target(EntityPath.parse(entity)))
    except EntityNameError as exc:  # a subscription's dead letters: sending to the topic reaches them all
        raise PlaybookError(f"rule {rule.name!r} (line {rule.line}): {exc} Give the rule a target:.") from None


def _target_of(playbook: Playbook, entity: str, rule: str, result: Plan) -> str | None:
    key = (entity, rule)
    if key not in result.targets and key not in result.unmoved:
        found = target_of(playbook, entity, rule)
        if found is None:
            result.unmoved.add(key)  # asked once per (entity, rule), not once per message
        else:
            result.targets[key] = found
    return result.targets.get(key)


def _said_unevaluated(selectors: list[Selector], result: Plan) -> None:
    for s in selectors:
        if s.where is not None:
            s.where.check()  # raised on every message it saw: a mistake, said before anything moves
            if s.where.unevaluated:
                result.unevaluated[s.rule.name] = s.where.unevaluated


def _route_lines(conn: LiveConnection, topic: str, records: list[dict[str, Any]]) -> list[str]:
    from ...topology.route import route

    return route(topic, records, resubmitted=True, explain=False, connection=conn).summary_lines()
