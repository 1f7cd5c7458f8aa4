"""A playbook file (YAML) read and checked: every key known, every value of its kind, every
expression and time readable, before anything is read from a namespace. A mistake is one line with
the file, line and column and, for a key, the nearest valid name (``PlaybookError``).

The schema (docs/playbooks.md shows it with an example)::

    playbook: NAME                 # required: names the audit's files and the resumable state
    connection: REF                # optional: a named connection, env:NAME or secret:SCOPE/KEY
    entities: [QUEUE, "TOPIC/subscriptions/GLOB", ...]   # required: their dead-letter queues
    rules:                         # required, in order: a message is handled by the first it matches
      - name: NAME                 # required, unique
        when: {signature, reason, description, subject: TEXT or GLOB; where: SEARCH;
               enqueued_after, enqueued_before: WHEN; properties: {NAME: VALUE}}
        do: resubmit | park | discard | keep
        # resubmit: target, rate, max_in_flight, canary, canary_timeout, stop_if_dead_letters,
        #           stop_if_active, watch, watch_interval, edit: {patch, set_properties,
        #           remove_properties, subject, time_to_live, session_id} (core.MessageEdit);
        #           park: to (required) and the same
    audit: FOLDER                  # required: one file a run
    format: jsonl | parquet        # the audit's (default jsonl)
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...entities import EntityPath
from ...errors import InvalidInputError
from ...operations.window import enqueued_window
from ...rates import parse_rate
from ...times import parse_time
from ...views.search import compile_where
from ..brake import Brake
from ..canary import Canary
from ..edits import MessageEdit

ACTIONS = ("resubmit", "park", "discard", "keep")
WHEN_KEYS = (
    "signature",
    "reason",
    "description",
    "subject",
    "where",
    "enqueued_after",
    "enqueued_before",
    "properties",
)
MOVE_KEYS = (
    "rate",
    "max_in_flight",
    "canary",
    "canary_timeout",
    "stop_if_dead_letters",
    "stop_if_active",
    "watch",
    "watch_interval",
)
RULE_KEYS = {  # the keys a rule takes, by its action
    "resubmit": ("name", "when", "do", "target", *MOVE_KEYS, "edit"),
    "park": ("name", "when", "do", "to", *MOVE_KEYS, "edit"),
    "discard": ("name", "when", "do"),
    "keep": ("name", "when", "do"),
}
TOP_KEYS = ("playbook", "connection", "entities", "rules", "audit", "format")
FORMATS = ("jsonl", "parquet")
# pandas writes Parquet with either (DataFrame.to_parquet's engine="auto" tries them in this order)
PARQUET_ENGINES = ("pyarrow", "fastparquet")


class PlaybookError(InvalidInputError):
    """A playbook that cannot be run as written: ``file:line:column: what is wrong``. Nothing was read
    or touched."""


@dataclass(frozen=True)
class Rule:
    """One rule: which messages (``when``: the keys given, as written), what to do, and the options
    of the operation that does it (resubmit's keywords: ``rate``, ``max_in_flight``; the brake and
    canary as values)."""

    name: str
    do: str
    when: Mapping[str, Any] = field(default_factory=dict)
    target: str | None = None  # resubmit: where to (None: its own entity); park: the parking queue
    options: Mapping[str, Any] = field(default_factory=dict)  # rate, max_in_flight
    brake: Brake | None = None
    canary: Canary | None = None
    edit: MessageEdit | None = None  # what each copy changes (resubmit's edit=)
    line: int = 0  # where it is written (1-based), for what is said about it

    @property
    def moves(self) -> bool:
        """Whether the rule moves its messages (resubmit, park): copy first, complete second."""
        return self.do in ("resubmit", "park")


@dataclass(frozen=True)
class Playbook:
    """A playbook as loaded and checked (``load``)."""

    name: str
    entities: tuple[str, ...]
    rules: tuple[Rule, ...]
    audit: Path
    format: str = "jsonl"
    connection: str | None = None
    source: Path | None = None  # the file it was read from

    def rule(self, name: str) -> Rule:
        return next(r for r in self.rules if r.name == name)


class _Reader:
    """Reads the composed YAML nodes, saying each mistake at its node's place."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, node: yaml.Node, text: str) -> PlaybookError:
        mark = node.start_mark
        return PlaybookError(f"{self.path}:{mark.line + 1}:{mark.column + 1}: {text}")

    def mapping(self, node: yaml.Node, what: str, known: tuple[str, ...]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} is a mapping of keys (KEY: VALUE)")
        out: dict[str, yaml.Node] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name not in known:
                near = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
                hint = f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(known)})"
                raise self.fail(key, f"unknown key {name!r} in {what}{hint}")
            if name in out:
                raise self.fail(key, f"{name!r} is given twice in {what}")
            out[name] = value
        return out

    def text(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str" or not node.value.strip():
            raise self.fail(node, f"{what} is a non-empty text")
        return str(node.value)

    def texts(self, node: yaml.Node, what: str) -> list[str]:
        if isinstance(node, yaml.ScalarNode):
            return [self.text(node, what)]
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.fail(node, f"{what} is a text or a list of texts")
        return [self.text(item, what) for item in node.value]

    def value(self, node: yaml.Node) -> Any:
        return yaml.safe_load(yaml.serialize(node))

    def checked(self, node: yaml.Node, what: str, check: Any) -> Any:
        """``check(value)`` of the node's value; an error it raises is said at the node."""
        try:
            return check(self.value(node))
        except (InvalidInputError, ValueError, TypeError) as exc:
            raise self.fail(node, f"{what}: {exc}") from None


def load(path: str | Path) -> Playbook:
    """The playbook in ``path``, checked (see the module docstring); ``PlaybookError`` at the first
    mistake, with its file, line and column. Nothing is read from a namespace."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlaybookError(f"{path}: cannot read the playbook ({exc.strerror or exc}).") from None
    try:
        root = yaml.compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise PlaybookError(f"{where}: not YAML: {exc.problem}") from None
    if root is None:
        raise PlaybookError(f"{path}:1:1: the playbook is empty")
    read = _Reader(path)
    top = read.mapping(root, "the playbook", TOP_KEYS)
    for required in ("playbook", "entities", "rules", "audit"):
        if required not in top:
            raise read.fail(root, f"the playbook needs {required!r}")
    entities = read.texts(top["entities"], "entities")
    for node, entity in zip(_items(top["entities"]), entities, strict=True):
        read.checked(node, "entities", lambda _v, e=entity: EntityPath.parse(e.replace("*", "x").replace("?", "x")))
    rules_node = top["rules"]
    if not isinstance(rules_node, yaml.SequenceNode) or not rules_node.value:
        raise read.fail(rules_node, "rules is a list of rules (- name: ..., when: ..., do: ...)")
    rules = tuple(_rule(read, node) for node in rules_node.value)
    seen: set[str] = set()
    for node, rule in zip(rules_node.value, rules, strict=True):
        if rule.name in seen:
            raise read.fail(node, f"two rules are named {rule.name!r}: a rule's name says which rule did what")
        seen.add(rule.name)
    form = read.text(top["format"], "format") if "format" in top else "jsonl"
    if form not in FORMATS:
        raise read.fail(top["format"], f"format is one of {', '.join(FORMATS)}, not {form!r}")
    if form == "parquet" and parquet_engine() is None:
        # said at load, not after the run has moved messages and cannot write its audit
        raise read.fail(
            top["format"],
            f"format: parquet needs {' or '.join(PARQUET_ENGINES)} and neither is installed "
            "(pip install pyarrow), or write the audit as format: jsonl",
        )
    return Playbook(
        name=read.text(top["playbook"], "playbook"),
        entities=tuple(entities),
        rules=rules,
        audit=(path.parent / read.text(top["audit"], "audit")).resolve(),
        format=form,
        connection=read.text(top["connection"], "connection") if "connection" in top else None,
        source=path,
    )


def parquet_engine() -> str | None:
    """The first of ``PARQUET_ENGINES`` installed, or None."""
    return next((engine for engine in PARQUET_ENGINES if importlib.util.find_spec(engine) is not None), None)


def _items(node: yaml.Node) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else [node]


def _rule(read: _Reader, node: yaml.Node) -> Rule:
    every = tuple(dict.fromkeys(k for keys in RULE_KEYS.values() for k in keys))
    keys = read.mapping(node, "a rule", every)
    for required in ("name", "do"):
        if required not in keys:
            raise read.fail(node, f"a rule needs {required!r}")
    name = read.text(keys["name"], "a rule's name")
    do = read.text(keys["do"], f"rule {name!r}: do")
    if do not in ACTIONS:
        near = difflib.get_close_matches(do, ACTIONS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise read.fail(keys["do"], f"rule {name!r}: do is one of {', '.join(ACTIONS)}, not {do!r}{hint}")
    for key, value in keys.items():
        if key not in RULE_KEYS[do]:
            takes = ", ".join(RULE_KEYS[do])
            raise read.fail(value, f"rule {name!r}: {key!r} does not go with do: {do} (it takes {takes})")
    if do == "park" and "to" not in keys:
        raise read.fail(node, f"rule {name!r}: park needs 'to': the queue or topic the messages are parked in")
    when = _when(read, keys["when"], name) if "when" in keys else {}
    target = read.text(keys["to" if do == "park" else "target"], "a target") if {"to", "target"} & set(keys) else None
    options: dict[str, Any] = {k: read.value(keys[k]) for k in ("rate", "max_in_flight") if k in keys}
    if "rate" in options:
        read.checked(keys["rate"], f"rule {name!r}: rate", lambda v: parse_rate(str(v)))
    given = {k: read.value(keys[k]) for k in MOVE_KEYS if k in keys and k not in options}
    brake_keys = {k: v for k, v in given.items() if k.startswith("stop_if") or k.startswith("watch")}
    brake = read.checked(node, f"rule {name!r}", lambda _v: Brake(**brake_keys)) if brake_keys else None
    canary = None
    if "canary" in given:
        timeout = {"canary_timeout": given["canary_timeout"]} if "canary_timeout" in given else {}
        canary = read.checked(keys["canary"], f"rule {name!r}: canary", lambda v: Canary(v, **timeout))
    edit = read.checked(keys["edit"], f"rule {name!r}: edit", _edit) if "edit" in keys else None
    return Rule(name, do, when, target, options, brake, canary, edit, line=node.start_mark.line + 1)


def _edit(value: Any) -> MessageEdit:
    if not isinstance(value, Mapping):
        raise InvalidInputError("a mapping such as {patch: {version: 2}, set_properties: {fixed: true}}")
    return MessageEdit.of(value)


def _when(read: _Reader, node: yaml.Node, rule: str) -> dict[str, Any]:
    keys = read.mapping(node, f"rule {rule!r}: when", WHEN_KEYS)
    when: dict[str, Any] = {}
    for key, value in keys.items():
        what = f"rule {rule!r}: when.{key}"
        if key == "where":
            when[key] = read.text(value, what)
            read.checked(value, what, compile_where)
        elif key in ("enqueued_after", "enqueued_before"):
            when[key] = read.value(value)  # an age (10m), or a time YAML may have read as a datetime
            read.checked(value, what, lambda v, k=key: parse_time(v, name=k))
        elif key == "properties":
            found = read.value(value)
            if not isinstance(found, dict) or not found:
                raise read.fail(value, f"{what} is a mapping of property names to the values they must equal")
            when[key] = found
        else:
            when[key] = read.text(value, what)
    if "enqueued_after" in when or "enqueued_before" in when:
        after, before = when.get("enqueued_after"), when.get("enqueued_before")
        read.checked(node, f"rule {rule!r}: when", lambda _v: enqueued_window(after, before))
    return when
