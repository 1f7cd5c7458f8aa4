"""%sb_entities: list the namespace's entities with their counts, and create, update or delete queues,
topics, subscriptions and rules (the administration API, through sbnotebook.core.operations.manage)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ... import core
from ...core import LiveConnection
from ..cells import json_object
from .command import command, parser
from .targets import address, shown

if TYPE_CHECKING:
    from .state import MagicsState

ENTITIES = parser(
    "sb_entities",
    "Queues, topics and subscriptions with their message counts; show, create, update or delete them\n"
    "and their rules. Deleting shows what would go and asks (type 'delete') unless --yes.",
    "  %sb_entities\n  df = %sb_entities\n  %sb_entities prod:          # the entities of the connection named prod\n"
    "  %sb_entities --panel\n"
    "  %sb_entities show orders\n"
    "  %sb_entities create queue orders --lock-duration 1m --max-delivery-count 5 --requires-session\n"
    "  %sb_entities create topic events --ttl 7d\n"
    "  %sb_entities create subscription events/subscriptions/audit --forward-dlq-to audit-dlq\n"
    "  %sb_entities update orders --max-delivery-count 10 --property user_metadata=team-a\n"
    "  %sb_entities delete orders\n"
    "  %sb_entities rules events/subscriptions/audit\n"
    "  %sb_entities rule add events/subscriptions/audit eu --sql \"region = 'eu'\" --action \"SET tier = 'eu'\"\n"
    '  %sb_entities rule add events/subscriptions/audit orders --correlation \'{"subject": "order"}\'\n'
    "  %sb_entities rule delete events/subscriptions/audit $Default --yes",
)
ENTITIES.add_argument("words", nargs="*", help="show / create KIND NAME / update / delete / rules / rule add|delete")
ENTITIES.add_argument("--lock-duration", metavar="D", help="30s, 5m, PT1M: how long a receive locks a message")
ENTITIES.add_argument("--max-delivery-count", metavar="N", help="deliveries before a message is dead-lettered")
ENTITIES.add_argument("--requires-session", action="store_true", help="create a session-enabled queue/subscription")
ENTITIES.add_argument("--ttl", metavar="D", help="default message time to live (30m, 7d)")
ENTITIES.add_argument("--dead-letter-on-expiration", metavar="BOOL", help="dead-letter expired messages: true/false")
ENTITIES.add_argument("--duplicate-detection", metavar="D", help="duplicate detection window (create: turns it on)")
ENTITIES.add_argument("--forward-to", metavar="ENTITY", help="forward every message to this queue or topic")
ENTITIES.add_argument("--forward-dlq-to", metavar="ENTITY", help="forward dead-lettered messages to this entity")
ENTITIES.add_argument("--max-size-mb", metavar="N", help="maximum size in megabytes (queues, topics)")
ENTITIES.add_argument(
    "--property", metavar="NAME=VALUE", action="append", default=[], help="any property by its SDK name"
)
ENTITIES.add_argument("--sql", metavar="EXPR", help="rule add: a SQL filter")
ENTITIES.add_argument("--correlation", metavar="JSON", help="rule add: a correlation filter (fields, properties)")
ENTITIES.add_argument("--action", metavar="SQL", help="rule add: a SQL action (SET / REMOVE)")
ENTITIES.add_argument("--yes", action="store_true", help="delete without asking")
ENTITIES.add_argument("--panel", action="store_true", help="the entity panel: list, create, update, delete, rules")
ENTITIES.add_argument(
    "--connection", metavar="NAME", help="a named connection's entities (as NAME: alone, or NAME:ENTITY, says)"
)
ENTITIES.rename("--set", "--property")  # --set took JSON in %sb_session_state: one flag, one kind of value

# Option -> the SDK property it sets.
_OPTIONS = {
    "lock_duration": "lock_duration",
    "max_delivery_count": "max_delivery_count",
    "ttl": "default_message_time_to_live",
    "dead_letter_on_expiration": "dead_lettering_on_message_expiration",
    "duplicate_detection": "duplicate_detection_history_time_window",
    "forward_to": "forward_to",
    "forward_dlq_to": "forward_dead_lettered_messages_to",
    "max_size_mb": "max_size_in_megabytes",
}


def _properties(args: argparse.Namespace, creating: bool) -> dict[str, Any]:
    props: dict[str, Any] = {sdk: getattr(args, opt) for opt, sdk in _OPTIONS.items() if getattr(args, opt)}
    if args.requires_session:
        if not creating:
            raise UsageError("--requires-session is set when an entity is created; it cannot change later.")
        props["requires_session"] = True
    if creating and args.duplicate_detection:
        props["requires_duplicate_detection"] = True
    for item in args.property:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--property takes NAME=VALUE (an SDK property name), not {item!r}.")
        props[name.strip()] = value
    return props


def _listing(self: MagicsState, conn: LiveConnection, name: str | None) -> Any:
    """The entities with their counts; a named connection's as NAME:ENTITY (what commands take)."""
    import pandas as pd

    rows = core.list_entities(connection=conn)
    if self.completer is not None:  # Tab completion takes the names just listed
        topics: dict[str, list[str]] = {r.entity: [] for r in rows if r.kind == "topic"}
        for r in rows:
            if r.kind == "subscription":
                topic, _, sub = r.entity.partition("/subscriptions/")
                topics.setdefault(topic, []).append(sub)
        self.completer.names_of(conn).fill([r.entity for r in rows if r.kind == "queue"], topics)
    columns = ["entity", "kind", "active", "dead_letter", "scheduled", "transfer_dead_letter", "total"]
    frame = pd.DataFrame([{c: getattr(r, c) for c in columns} for r in rows], columns=columns)
    if name is not None:
        frame["entity"] = [f"{name}:{e}" for e in frame["entity"]]
        print(f"{len(frame)} entities of {name} ({conn.fully_qualified_namespace}).")
    return frame


def _need(words: list[str], count: int, usage: str) -> list[str]:
    if len(words) != count:
        raise UsageError(f"%sb_entities {usage}")
    return words


@command(ENTITIES)
def sb_entities(self: MagicsState, args: argparse.Namespace) -> Any:
    words = list(args.words)
    name = args.connection
    if len(words) == 1 and words[0].endswith(":") and words[0].count(":") == 1:  # NAME: alone
        name, words = words[0][:-1].strip(), []
        core.split_address(f"{name}:x")  # a bad name (or none before the ':') fails in one line
    if name is not None and args.connection is not None and name != args.connection:
        raise UsageError(f"%sb_entities: --connection {args.connection} and {name}: name two connections.")
    conn = self.conn() if name is None else self.named(name)
    if args.panel:
        from ..widgets.entities import EntityPanel

        return EntityPanel(connection=conn)
    if not words:
        return _listing(self, conn, name)
    verb, rest = words[0].lower(), words[1:]
    at = 1 if verb in ("create", "rule") else 0  # where the entity is among the words after the verb
    if len(rest) > at and ":" in rest[at]:
        typed = rest[at]
        rest[at], conn = address(self, typed)  # NAME:ENTITY
        name = typed.split(":", 1)[0].strip()
    self.bound_name = name  # the lines below say NAME:ENTITY
    try:
        return _act(self, verb, rest, args, conn)  # a create or delete: Tab completion lists names again
    finally:
        self.bound_name = None


def _act(self: MagicsState, verb: str, rest: list[str], args: argparse.Namespace, conn: LiveConnection) -> Any:
    if verb == "show":
        (entity,) = _need(rest, 1, "show ENTITY")
        return _show(core.entity_properties(entity, connection=conn))
    if verb == "create":
        kind, entity = _need(rest, 2, "create queue|topic|subscription NAME [options]")
        if kind not in ("queue", "topic", "subscription"):
            raise UsageError(f"%sb_entities create takes queue, topic or subscription, not {kind!r}.")
        made = core.create_entity(entity, kind=kind, properties=_properties(args, True), connection=conn)
        print(f"Created {made['kind']} {shown(self, entity)}.")
        return _show(made)
    if verb == "update":
        (entity,) = _need(rest, 1, "update ENTITY --option VALUE ...")
        props = _properties(args, False)
        if not props:
            raise UsageError("Say what to change, e.g. %sb_entities update orders --max-delivery-count 10.")
        change = core.update_entity(entity, props, connection=conn)
        for name, after in change["after"].items():
            print(f"{shown(self, entity)}: {name} {change['before'][name]} -> {after}")
        return None
    if verb == "delete":
        (entity,) = _need(rest, 1, "delete ENTITY [--yes]")
        return _delete(self, entity, args.yes, conn)
    if verb == "rules":
        (entity,) = _need(rest, 1, "rules TOPIC/subscriptions/NAME")
        return _rules(core.list_rules(entity, connection=conn))
    if verb == "rule":
        return _rule(self, rest, args, conn)
    raise UsageError(f"%sb_entities: {verb!r} is not show, create, update, delete, rules or rule (see -h).")


def _show(props: dict[str, Any]) -> Any:
    import pandas as pd

    return pd.DataFrame({"property": list(props), "value": [str(v) for v in props.values()]})


def _delete(self: MagicsState, entity: str, yes: bool, conn: LiveConnection) -> None:
    kind = core.entity_properties(entity, connection=conn)["kind"]
    held = ""
    if kind != "topic":
        counts = core.counts(entity, connection=conn)
        held = f" holding {counts.active} active, {counts.dead_letter} dead-lettered, {counts.scheduled} scheduled"
    print(f"Delete {kind} {shown(self, entity)}{held}: its messages go with it.")
    if not yes:
        self.ask(f"This deletes {kind} {shown(self, entity)} for good.", "delete")
    core.delete_entity(entity, connection=conn)
    print(f"Deleted {kind} {shown(self, entity)}.")


def _rules(rules: list[core.RuleInfo]) -> Any:
    import pandas as pd

    columns = ["name", "filter_kind", "filter", "action"]
    return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in rules], columns=columns)


def _rule(self: MagicsState, rest: list[str], args: argparse.Namespace, conn: LiveConnection) -> Any:
    what = rest[0].lower() if rest else ""
    if what == "add":
        _, entity, name = _need(rest, 3, "rule add TOPIC/subscriptions/NAME RULE (--sql EXPR | --correlation JSON)")
        correlation = (
            None if args.correlation is None else json_object(args.correlation, "--correlation", '{"subject": "order"}')
        )
        rule = core.create_rule(
            entity, name, sql=args.sql, correlation=correlation, action=args.action, connection=conn
        )
        print(f"Added rule {name} to {shown(self, entity)}: {rule.filter_kind} filter {rule.filter}.")
        return None
    if what == "delete":
        _, entity, name = _need(rest, 3, "rule delete TOPIC/subscriptions/NAME RULE [--yes]")
        remaining = [r.name for r in core.list_rules(entity, connection=conn)]
        if name not in remaining:
            listed = ", ".join(remaining) or "none"
            raise UsageError(f"{shown(self, entity)} has no rule {name!r}; its rules: {listed}.")
        if len(remaining) == 1:
            print(f"{name} is the last rule of {shown(self, entity)}: without a rule it receives nothing.")
        if not args.yes:
            self.ask(f"Delete rule {name} of {shown(self, entity)}?", "delete")
        core.delete_rule(entity, name, connection=conn)
        print(f"Deleted rule {name} of {shown(self, entity)}.")
        return None
    raise UsageError("%sb_entities rule add|delete TOPIC/subscriptions/NAME RULE ...")
