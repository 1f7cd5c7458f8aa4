"""A namespace's topology, exported: its queues, topics, subscriptions and rules read through the
administration API and written as Microsoft's emulator Config.json (``config_json``), for
``sbnotebook emulator --config FILE`` (or Microsoft's emulator) to reproduce at home.

``entities``: globs of queue and topic names (``orders*``, ``orders*,payments``, case-insensitive);
a topic's subscriptions and rules come with it. An entity a match forwards to (``ForwardTo``,
``ForwardDeadLetteredMessagesTo``) is exported too, and named in a note: without it, the emulator
could not forward (and refuses the file). No key and no policy is read or written.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..connections.registry import ConnectionLike, live
from ..entities import entity_name
from ..errors import InvalidInputError
from ..operations.counts import admin_call
from .config_json import (
    MAX_ENTITIES,
    MAX_SUBSCRIPTIONS,
    NAME,
    QUEUE_FIELDS,
    SUBSCRIPTION_FIELDS,
    TOPIC_FIELDS,
    Notes,
    properties,
    rules,
)

T = TypeVar("T")
NAMESPACE = "sbemulatorns"  # the one namespace name Microsoft's emulator takes (its schema's enum)


@dataclass
class TopologyExport:
    """What ``export_topology`` wrote: ``config`` (the Config.json document), the ``notes`` (what the
    format or Microsoft's emulator cannot hold, once per kind), counts, and the entities exported
    because a match forwards to them (``added``)."""

    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    path: Path | None = None

    @property
    def namespace(self) -> dict[str, Any]:
        return dict(self.config["UserConfig"]["Namespaces"][0])

    def counts(self) -> dict[str, int]:
        ns = self.namespace
        subs = [s for t in ns["Topics"] for s in t["Subscriptions"]]
        rules = sum(len(s.get("Rules", [])) for s in subs)
        return {"queues": len(ns["Queues"]), "topics": len(ns["Topics"]), "subscriptions": len(subs), "rules": rules}

    def summary(self) -> str:
        c = self.counts()
        where = f" to {self.path}" if self.path is not None else ""
        return (
            f"Exported {c['queues']} queues, {c['topics']} topics, {c['subscriptions']} subscriptions and "
            f"{c['rules']} rules{where} (Microsoft's emulator Config.json format; no keys)."
        )

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.added:
            lines.append(f"Also exported, as forwarding targets of matching entities: {', '.join(self.added)}.")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _globs(entities: str | None) -> list[str]:
    globs = [g.strip().lower() for g in (entities or "*").split(",") if g.strip()]
    if not globs:
        raise InvalidInputError("entities takes globs of queue and topic names, such as 'orders*' or 'orders*,audit'.")
    return globs


@dataclass
class _Namespace:
    """What the administration API said: queues and topics by name, each topic's subscriptions, and
    each subscription's rules (by topic and subscription name)."""

    queues: dict[str, Any]
    topics: dict[str, Any]
    subscriptions: dict[str, list[Any]]
    rules: dict[tuple[str, str], list[Any]]

    def forwards(self, name: str) -> list[str]:
        """The entities ``name`` (a queue, or a topic's subscriptions) forwards messages to."""
        described = [self.queues[name]] if name in self.queues else self.subscriptions.get(name, [])
        targets = [t for d in described for t in (d.forward_to, d.forward_dead_lettered_messages_to)]
        return [n for n in (entity_name(t) for t in targets) if n]


def _read(admin: Any) -> _Namespace:
    queues = {q.name: q for q in admin.list_queues()}
    topics = {t.name: t for t in admin.list_topics()}
    subscriptions = {name: list(admin.list_subscriptions(name)) for name in topics}
    rules = {(t, s.name): list(admin.list_rules(t, s.name)) for t, subs in subscriptions.items() for s in subs}
    return _Namespace(queues, topics, subscriptions, rules)


def _chosen(ns: _Namespace, globs: list[str]) -> tuple[list[str], list[str]]:
    """The names that match, and those added because a match forwards to them (transitively)."""
    known = {n.lower(): n for n in [*ns.queues, *ns.topics]}
    chosen = {n for n in known.values() if any(fnmatch.fnmatchcase(n.lower(), g) for g in globs)}
    added: list[str] = []
    todo = list(chosen)
    while todo:
        for target in ns.forwards(todo.pop()):
            found = known.get(target.lower())
            if found is not None and found not in chosen:
                chosen.add(found)
                added.append(found)
                todo.append(found)
    return sorted(chosen, key=str.lower), sorted(added, key=str.lower)


def _topic(ns: _Namespace, name: str, notes: Notes) -> dict[str, Any]:
    subs = []
    for sub in ns.subscriptions[name]:
        where = f"{name}/{sub.name}"
        entry: dict[str, Any] = {
            "Name": sub.name,
            "Properties": properties("subscription", sub, SUBSCRIPTION_FIELDS, where, notes),
        }
        written = rules(ns.rules[(name, sub.name)], where, notes)
        if written:
            entry["Rules"] = written
        subs.append(entry)
    if not subs:
        notes.add("topics without subscriptions (Microsoft's schema wants one; the kit's emulator takes none)", name)
    if len(subs) > MAX_SUBSCRIPTIONS:
        notes.add(f"topics with more than {MAX_SUBSCRIPTIONS} subscriptions (Microsoft's emulator's most)", name)
    described = properties("topic", ns.topics[name], TOPIC_FIELDS, name, notes)
    return {"Name": name, "Properties": described, "Subscriptions": subs}


def export_topology(
    path: str | Path | None = None, *, entities: str | None = None, connection: ConnectionLike = None
) -> TopologyExport:
    """The namespace's queues, topics, subscriptions and rules (those ``entities`` matches, and what
    they forward to) as Microsoft's emulator Config.json, written to ``path`` when given (see the
    module docstring). Its ``notes`` say what the format or Microsoft's emulator cannot hold."""
    conn = live(connection)
    ns = admin_call(conn, _read)
    names, added = _chosen(ns, _globs(entities))
    notes = Notes()
    out_queues = []
    for name in (n for n in names if n in ns.queues):
        out_queues.append({"Name": name, "Properties": properties("queue", ns.queues[name], QUEUE_FIELDS, name, notes)})
    out_topics = [_topic(ns, n, notes) for n in names if n in ns.topics]
    if len(names) > MAX_ENTITIES:
        notes.add(f"more than {MAX_ENTITIES} queues and topics (Microsoft's emulator's most)", f"{len(names)} of them")
    for name in names:
        if not NAME.match(name):
            notes.add("entity names Microsoft's schema refuses (the kit's emulator takes them)", name)
    namespace = {"Name": NAMESPACE, "Queues": out_queues, "Topics": out_topics}
    config = {"UserConfig": {"Namespaces": [namespace], "Logging": {"Type": "File"}}}
    result = TopologyExport(config, notes.lines(), added)
    if path is not None:
        result.path = Path(path)
        result.path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return result
