"""``route``: which subscriptions of a topic given messages go to, by which rules, with the
properties each rule's action leaves, and for the others the first clause that failed with the
values it saw. The rules are evaluated by the broker's own evaluator (``sbnotebook.sqlrules``,
compiled once per rule); messages and rules come from where they are (below)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..connections.registry import ConnectionLike, live
from ..entities import EntityPath
from ..errors import InvalidInputError
from ..files.exporting import entity_pages
from ..files.jsonl import iter_jsonl, typed_fields
from ..operations.copies import DEAD_LETTER_PROPERTIES
from ..operations.typed import typed_content
from ..operations.window import When, enqueued_window
from ..views.records import FIELDS, to_record
from ..views.search import WhereLike, as_where
from .answer import RouteResult, without_cyclic_gc
from .evaluator import BROKER_PROPERTIES, RuleSpec, compile_topic, route_one
from .rules import given_rules, rules_from_admin, rules_from_config, what_if_rules

Messages = str | Path | Mapping[str, Any] | Iterable[Mapping[str, Any]] | Any
_FIELD_NAMES = {f.name for f in FIELDS}
_BROKER_KEYS = {"reply_to_session_id": "ReplyToSessionId"}  # typed by their snake_case names, as record fields are


def typed_in(properties: Mapping[str, Any], body: str | None = None) -> dict[str, Any]:
    """A message typed by hand: the record's fields (``subject``, ``message_id``, ``to``, ...) and
    ``reply_to_session_id`` by their names, every other key an application property (its JSON value
    as it is)."""
    record: dict[str, Any] = {k: v for k, v in properties.items() if k in _FIELD_NAMES}
    broker = {name: properties[key] for key, name in _BROKER_KEYS.items() if key in properties}
    if broker:
        record[BROKER_PROPERTIES] = broker
    extra = {k: v for k, v in properties.items() if k not in _FIELD_NAMES and k not in _BROKER_KEYS}
    record["application_properties"] = {**dict(record.get("application_properties") or {}), **extra}
    if body is not None:
        record.setdefault("body_text", body)
    return record


def _entity_records(entity: str, where: WhereLike, window: Any, conn: Any) -> Iterator[dict[str, Any]]:
    """An entity's messages (or its window's, or ``where``'s), each a record with its typed properties."""
    name = str(EntityPath.parse(entity))
    matches = as_where(where)
    for page in entity_pages(conn, name, 1, window):
        for msg in page:
            record = to_record(msg, name)
            if matches is not None and not matches(record):
                continue
            if msg.reply_to_session_id is not None:  # the record schema has no field for it
                record[BROKER_PROPERTIES] = {"ReplyToSessionId": msg.reply_to_session_id}
            typed = typed_content(msg)
            if typed is not None:
                fields = typed_fields(typed)
                record["application_properties"] = fields["application_properties"]
                record["application_property_types"] = fields["application_property_types"]
            yield record
    if matches is not None:
        matches.check()


_PANDAS_MISSING = frozenset({"NaTType", "NAType"})


def _cleaned(row: Mapping[str, Any]) -> dict[str, Any]:
    """A DataFrame row: pandas' NaN, NaT and NA for missing values read as None."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        # pandas' NaT, and its NA, which a nullable column holds (pandas 1.5, DBR 15.4's, for sequence_number)
        missing = v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in _PANDAS_MISSING
        out[str(k)] = None if missing else v
    return out


def messages_of(
    messages: Messages,
    *,
    where: WhereLike = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    connection: ConnectionLike = None,
) -> tuple[Iterable[Mapping[str, Any]], str]:
    """The records to route and what they are (for the lines): an entity or its dead-letter queue
    (read whole, or ``where``'s matches, or a time window's), a JSONL export file, a pandas
    DataFrame of records, one record or dict typed by hand, or an iterable of them."""
    window = enqueued_window(enqueued_after, enqueued_before)
    if isinstance(messages, str | Path):
        if Path(messages).is_file():
            return iter_jsonl(messages), str(messages)
        if isinstance(messages, Path):
            raise InvalidInputError(f"No such file: {messages}.")
        return _entity_records(messages, where, window, live(connection)), messages
    if where is not None or window is not None:
        raise InvalidInputError(
            "where and the time window select messages of an entity: route takes these as they are."
        )
    if isinstance(messages, Mapping):
        return [messages], "one message"
    if hasattr(messages, "to_dict") and hasattr(messages, "columns"):  # a pandas DataFrame of records
        return [_cleaned(r) for r in messages.to_dict("records")], "a DataFrame"
    return messages, "the messages given"


def _resubmitted(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record as a resubmit sends it: the broker's dead-letter properties dropped."""
    out = dict(record)
    for key in ("application_properties", "application_property_types"):
        if isinstance(out.get(key), Mapping):
            out[key] = {k: v for k, v in out[key].items() if k.lower() not in DEAD_LETTER_PROPERTIES}
    return out


def topic_rules(
    topic: str,
    *,
    rules: Iterable[RuleSpec] | Mapping[str, Iterable[RuleSpec | str]] | None = None,
    topology: str | Path | Mapping[str, Any] | None = None,
    extra_rules: Iterable[str] = (),
    connection: ConnectionLike = None,
) -> tuple[list[RuleSpec], str]:
    """The rules ``route`` evaluates, and where they came from."""
    if rules is not None and topology is not None:
        raise InvalidInputError("route takes rules= or topology=, not both.")
    if rules is not None:
        found, said = given_rules(rules), "the rules given"
    elif topology is not None:
        found = rules_from_config(topology, topic)
        said = f"rules from {topology}" if isinstance(topology, str | Path) else "rules from the topology given"
    else:
        found, said = rules_from_admin(topic, connection=connection), "rules from the administration API"
    extra = what_if_rules(extra_rules)
    return found + extra, said + (f" and {len(extra)} what-if" if extra else "")


def route(
    topic: str,
    messages: Messages,
    *,
    rules: Iterable[RuleSpec] | Mapping[str, Iterable[RuleSpec | str]] | None = None,
    topology: str | Path | Mapping[str, Any] | None = None,
    extra_rules: Iterable[str] = (),
    where: WhereLike = None,
    enqueued_after: When | None = None,
    enqueued_before: When | None = None,
    resubmitted: bool = False,
    explain: bool = True,
    connection: ConnectionLike = None,
    source_connection: ConnectionLike = None,
) -> RouteResult:
    """For each message and each subscription of ``topic``: the copies it gets (by which rule, with
    the properties after the rule's action) or, ``explain``-ing, why not (each rule's first failing
    clause with the values seen).

    ``messages``: an entity or its dead-letter queue (the entity's path and ``DEAD_LETTER_QUEUE``;
    ``where`` and ``enqueued_after`` / ``enqueued_before`` select as elsewhere), a JSONL export file,
    a pandas DataFrame of records, a record or dict typed by hand (``typed_in``), or an iterable of
    them. Rules: ``rules=`` by hand, ``topology=`` a Config.json, else the connection's
    administration API (the Manage right); ``extra_rules``: SQL filters evaluated beside them, each
    as a subscription of its own. A filter outside the grammar is refused with its position.
    ``resubmitted``: the messages as a resubmit would send them (dead-letter properties dropped).
    ``source_connection``: the connection an entity's messages are read through when it is not the
    topic's (``%sb_route prod:orders home:orders-audit``); by default ``connection``."""
    specs, rules_from = topic_rules(
        topic, rules=rules, topology=topology, extra_rules=extra_rules, connection=connection
    )
    compiled = compile_topic(specs)
    records, source = messages_of(
        messages,
        where=where,
        enqueued_after=enqueued_after,
        enqueued_before=enqueued_before,
        connection=connection if source_connection is None else source_connection,
    )
    result = RouteResult(topic, list(compiled), source=source, rules_from=rules_from)

    def routed() -> RouteResult:
        for index, record in enumerate(records):
            result.routed += route_one(index, _resubmitted(record) if resubmitted else record, compiled, explain)
            result.messages = index + 1
        return result

    # Records in hand (a DataFrame, a list, a file): the collector held off. An entity's pages
    # arrive through the connection's loop, whose own garbage may be cyclic: left to it.
    from_entity = isinstance(messages, str) and not Path(messages).is_file()
    return routed() if from_entity else without_cyclic_gc(routed)
