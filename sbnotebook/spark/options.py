"""Data source options, checked on the driver before any job runs, with one clear message each."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Self, overload

from ..core import (
    DEAD_LETTER_QUEUE,
    ENV_CONNECTION_STRING,
    ENV_NAMESPACE,
    RECORD_FIELDS,
    Connection,
    EntityNotFoundError,
    EntityPath,
    SbError,
    TimeWindow,
    live_connection,
    redact,
    resolve,
)
from .secrets import EntraRef, SecretRef, Source, connection_of, entra_ref, over_websockets, parse_ref

log = logging.getLogger("sbnotebook.spark")
MODES = ("peek", "receive-and-delete", "defer")
DESTRUCTIVE_BOUND = 1000  # maxMessages of a receive-and-delete or defer read that gives none: always a bound


class OptionError(SbError, ValueError):
    """A missing or bad option (raised on the driver, before Spark starts a job). A ``ValueError``
    too: code written before it joined the kit's family catches that."""


# Every option the data source knows, per kind: the one table (docs/spark.md's tables list the same).
# Spark hands options over case-insensitively, so they are compared that way.
_WHERE = (
    "entity",
    "secretRef",
    "connectionString",
    "fullyQualifiedNamespace",
    "namespace",
    "credentialRef",
    "websockets",
)
_BODY = ("bodyFormat", "bodySchema", "bodySampleSize")
KNOWN_OPTIONS: dict[str, tuple[str, ...]] = {
    "read": (
        *_WHERE,
        "mode",
        "maxMessages",
        "numPartitions",
        "fromSequenceNumber",
        "enqueuedAfter",
        "enqueuedBefore",
        "maxInFlight",
        "waitSeconds",
        "sessionIds",
        *_BODY,
    ),
    # "mode" is known so that its own message (a stream has no modes) is the one said.
    "stream": (
        *_WHERE,
        "mode",
        "maxMessagesPerTrigger",
        "numPartitions",
        "sessionId",
        "waitSeconds",
        "maxInFlight",
        "fromSequenceNumber",
        *_BODY,
    ),
    "write": (*_WHERE, "maxInFlight", "batch"),
    "stream write": (*_WHERE, "maxInFlight", "batch", "checkpointLocation"),  # Spark's own, passed along
}
SPARK_OWN = ("path",)  # what Spark adds itself (`.load(path)`): not refused here, said by `entity` checks


def check_known(options: Mapping[str, str], *kinds: str) -> None:
    """Refuse an option none of these kinds of read or write knows, naming the closest known one: a
    misspelt `maxMessages` must not fall back to the default (it would delete up to 1,000, not 10)."""
    import difflib

    known = tuple(dict.fromkeys(k for kind in kinds for k in KNOWN_OPTIONS[kind]))
    kind = " or ".join(kinds)
    lowered = {k.lower(): k for k in known}
    for given in options:
        key = str(given)
        if key.lower() in lowered or key.lower() in SPARK_OWN:
            continue
        elsewhere = [
            k for k, names in KNOWN_OPTIONS.items() if k not in kinds and key.lower() in {n.lower() for n in names}
        ]
        note = f" (an option of a {' and a '.join(elsewhere)})" if elsewhere else ""
        close = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
        hint = f": did you mean {lowered[close[0]]}?" if close else f"; known: {', '.join(known)}"
        raise OptionError(f"servicebus: unknown option {key!r} for a {kind}{note}{hint}")


@overload
def int_option(options: Mapping[str, str], name: str, default: int, minimum: int) -> int: ...


@overload
def int_option(options: Mapping[str, str], name: str, default: None, minimum: int) -> int | None: ...


def int_option(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    """A whole-number option: refused below ``minimum`` (naming it), never replaced; ``default``
    only when it is not given."""
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"servicebus: option {name} must be a whole number, not {raw!r}.") from None
    if value < minimum:
        raise OptionError(f"servicebus: option {name} must be {minimum} or more, not {value}.")
    return value


def float_option(options: Mapping[str, str], name: str, default: float) -> float:
    """Seconds: more than 0 (0 or less is refused, naming the option), never replaced."""
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(str(raw))
    except ValueError:
        raise OptionError(f"servicebus: option {name} must be a number of seconds, not {raw!r}.") from None
    if not value > 0:  # NaN too
        raise OptionError(f"servicebus: option {name} must be more than 0 seconds, not {raw}.")
    return value


def time_option(options: Mapping[str, str], name: str) -> dt.datetime | None:
    """An enqueued-time bound: ISO 8601 (``2026-11-25``, ``2026-11-25T08:00:00+01:00``; without a zone
    it is UTC, as Service Bus's times) or seconds since the epoch (``1764028800``)."""
    raw = options.get(name)
    if raw is None or not str(raw).strip():
        return None
    text = str(raw).strip()
    try:
        return dt.datetime.fromtimestamp(float(text), dt.UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise OptionError(
            f"servicebus: option {name} must be an ISO 8601 time (2026-11-25T08:00:00Z; without a zone: UTC) "
            f"or seconds since the epoch, not {text!r}."
        ) from None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def time_window(options: Mapping[str, str]) -> TimeWindow | None:
    after, before = time_option(options, "enqueuedAfter"), time_option(options, "enqueuedBefore")
    if after is None and before is None:
        return None
    if after is not None and before is not None and not after < before:
        raise OptionError(
            f"servicebus: option enqueuedAfter ({after.isoformat()}) must be before enqueuedBefore "
            f"({before.isoformat()})."
        )
    return TimeWindow(after, before)


def connection(options: Mapping[str, str], default: Source | None) -> Source:
    """Where to connect (``_where``), over WebSockets when the ``websockets`` option is true."""
    found = _where(options, default)
    return over_websockets(found) if bool_option(options, "websockets") else found


def bool_option(options: Mapping[str, str], name: str) -> bool:
    """``true`` or ``false`` (any case; not given: false); anything else is refused, naming the option."""
    raw = str(options.get(name, "false")).strip().lower()
    if raw not in ("true", "false"):
        raise OptionError(f"servicebus: option {name} must be true or false, not {options.get(name)!r}.")
    return raw == "true"


def _where(options: Mapping[str, str], default: Source | None) -> Source:
    """secretRef (resolved later, where the connection is used), else fullyQualifiedNamespace (Entra
    ID: with credentialRef, a credential each process makes itself; without, DefaultAzureCredential),
    else connectionString, else what register() resolved in the notebook (its settings, its
    reference or its embedded emulator), else the environment. The data source runs in Spark's
    Python workers, never in the notebook's process, so it cannot start an emulator of its own."""
    ref = options.get("secretRef")
    text = options.get("connectionString")
    namespace = options.get("fullyQualifiedNamespace") or options.get("namespace")
    credential_ref = options.get("credentialRef")
    try:
        if sum(1 for given in (ref, text, namespace) if given) > 1:
            raise OptionError("servicebus: give one of secretRef, fullyQualifiedNamespace or connectionString.")
        if credential_ref and not namespace:
            raise OptionError(
                "servicebus: credentialRef signs in to a namespace: give fullyQualifiedNamespace with it "
                "(a secretRef or connectionString carries its own key)."
            )
        if ref:
            return parse_ref(ref)
        if credential_ref and namespace:
            return entra_ref(namespace, credential_ref)
        if text or namespace:
            return resolve(text or None, namespace=namespace or None)
        if default is not None:
            return default
        if os.environ.get(ENV_CONNECTION_STRING) or os.environ.get(ENV_NAMESPACE):
            return resolve()
    except SbError as exc:
        text = redact(str(exc))
        raise OptionError(text if text.startswith("servicebus:") else f"servicebus: {text}") from None
    raise OptionError(
        "servicebus: no connection: set the secretRef option (env:VARIABLE or databricks:scope/key), "
        "fullyQualifiedNamespace (with credentialRef callable:module:function or databricks:NAME, else "
        f"DefaultAzureCredential), or {ENV_CONNECTION_STRING}, or call sbnotebook.spark.register(spark, ...) "
        "in the notebook (it passes the notebook's connection, the embedded emulator by default)."
    )


def entity(options: Mapping[str, str]) -> EntityPath:
    name = options.get("entity")
    if not name:
        raise OptionError(
            "servicebus: the 'entity' option is required, for example .option('entity', 'orders') or "
            f"'events/subscriptions/audit' (add '/{DEAD_LETTER_QUEUE}' for a dead-letter queue)."
        )
    try:
        return EntityPath.parse(name)
    except SbError as exc:
        raise OptionError(f"servicebus: {exc}") from None


def check_exists(source: Source, path: EntityPath, *, for_send: bool) -> bool | None:
    """Fail early on an entity that does not exist; says whether a queue or subscription requires
    sessions (None when unknown). Without management rights the check is skipped: a send-only or
    listen-only key must still work. A reference this process cannot resolve (a Spark Connect client:
    the server and its executors hold the secret or the service credential) is checked where it is
    used instead."""
    if isinstance(source, (SecretRef, EntraRef)):
        try:
            conn = connection_of(source)
        except SbError as exc:
            log.info("servicebus: not checking %s here: %s", path, exc)
            return None
    else:
        conn = source
    try:
        admin = live_connection(conn).admin()
        if path.is_subscription:
            return bool(admin.get_subscription(path.name, path.subscription).requires_session)
        try:
            return bool(admin.get_queue(path.name).requires_session)
        except Exception as exc:
            if not for_send or type(exc).__name__ != "ResourceNotFoundError":
                raise
            admin.get_topic(path.name)
            return False
    except Exception as exc:
        if type(exc).__name__ == "ResourceNotFoundError":
            raise OptionError(f"servicebus: entity not found: {path}") from None
        if isinstance(exc, EntityNotFoundError):
            raise OptionError(f"servicebus: {exc}") from None
        # No management rights (or no admin endpoint): the read or write itself will report a missing entity.
        log.info("servicebus: could not check that %s exists (%s); going on", path, redact(str(exc)).splitlines()[0])
        return None


def _sessions(options: Mapping[str, str]) -> tuple[str, ...] | None:
    raw = options.get("sessionIds")
    if raw is None or not str(raw).strip():
        return None
    return tuple(dict.fromkeys(s.strip() for s in str(raw).split(",") if s.strip()))


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where every read and write goes, and how many operations it keeps in flight."""

    connection: Source
    entity: EntityPath
    max_in_flight: int

    def conn(self) -> Connection:
        """The connection, a secret reference resolved in this process (planner, driver or executor)."""
        return connection_of(self.connection)


@dataclass(frozen=True, kw_only=True)
class ReadingOptions(Target):
    """What a batch read and a stream both take; each adds its own options (``parse_read``)."""

    num_partitions: int
    wait_seconds: float

    @classmethod
    def parse_read(
        cls,
        options: Mapping[str, str],
        default_partitions: int,
        default_connection: Source | None,
        *,
        wait_seconds: float,
        **own: Any,
    ) -> tuple[Self, bool | None]:
        """The options every read takes, parsed with this kind's `own`, and whether the entity
        requires sessions (None when unknown), checked once, before any job runs."""
        parsed = cls(
            connection=connection(options, default_connection),
            entity=entity(options),
            max_in_flight=int_option(options, "maxInFlight", 10, 1),
            num_partitions=int_option(options, "numPartitions", default_partitions, 1),
            wait_seconds=float_option(options, "waitSeconds", wait_seconds),
            **own,
        )
        return parsed, check_exists(parsed.connection, parsed.entity.parent, for_send=False)


@dataclass(frozen=True, kw_only=True)
class ReadOptions(ReadingOptions):
    mode: str
    max_messages: int | None
    from_sequence_number: int
    sessions: tuple[str, ...] | None = None  # the sessionIds option: these sessions only
    session_enabled: bool = False  # the entity requires sessions: read session by session
    window: TimeWindow | None = None  # enqueuedAfter / enqueuedBefore (peek only)

    @classmethod
    def parse(
        cls,
        options: Mapping[str, str],
        default_partitions: int,
        default_connection: Source | None = None,
    ) -> ReadOptions:
        check_known(options, "read")
        mode = (options.get("mode") or "peek").strip().lower()
        if mode not in MODES:
            raise OptionError(f"servicebus: option mode must be one of {', '.join(MODES)}, not {mode!r}.")
        entity(options)  # a missing entity is the first thing to say
        window = time_window(options)
        if window is not None and mode != "peek":
            raise OptionError(
                f"servicebus: options enqueuedAfter and enqueuedBefore bound a peek read, not mode={mode} "
                "(a receive takes messages in the order they come)."
            )
        max_messages = int_option(options, "maxMessages", None, 1)
        if mode != "peek" and max_messages is None:
            max_messages = DESTRUCTIVE_BOUND
        parsed, requires_session = cls.parse_read(
            options,
            default_partitions,
            default_connection,
            wait_seconds=5.0,
            mode=mode,
            max_messages=max_messages,
            from_sequence_number=int_option(options, "fromSequenceNumber", 1, 0),
            sessions=_sessions(options),
            window=window,
        )
        path = parsed.entity
        session_enabled = bool(requires_session) and path.sub_queue is None  # dead-letter queues have none
        if parsed.sessions and requires_session is False:
            raise OptionError(f"servicebus: option sessionIds: {path} does not require sessions.")
        if parsed.sessions and path.sub_queue is not None:
            raise OptionError(f"servicebus: option sessionIds: {path} is a dead-letter queue, which has no sessions.")
        session_enabled = session_enabled or bool(parsed.sessions)
        if session_enabled and mode == "defer":
            raise OptionError(
                f"servicebus: {path} requires sessions, and mode=defer does not support them (a deferred session "
                "message can be settled only by a receiver holding its session): use peek or receive-and-delete."
            )
        return replace(parsed, session_enabled=session_enabled)


ALL_SESSIONS = "*"  # the sessionId option of a stream: every session, one after another
DEFAULT_PER_TRIGGER = 1000  # messages per micro-batch when maxMessagesPerTrigger is not given


@dataclass(frozen=True, kw_only=True)
class StreamOptions(ReadingOptions):
    max_per_trigger: int
    session: str | None  # None: the entity has no sessions; a session id; or "*": every session

    @classmethod
    def parse(
        cls,
        options: Mapping[str, str],
        default_partitions: int,
        default_connection: Source | None,
    ) -> StreamOptions:
        check_known(options, "stream")
        entity(options)  # a missing entity is the first thing to say
        if options.get("mode"):
            raise OptionError("servicebus: a stream always reads in peek-lock and settles after commit; drop 'mode'.")
        parsed, _ = cls.parse_read(
            options,
            default_partitions,
            default_connection,
            wait_seconds=1.0,
            max_per_trigger=int_option(options, "maxMessagesPerTrigger", DEFAULT_PER_TRIGGER, 1),
            session=(options.get("sessionId") or "").strip() or None,
        )
        return parsed


@dataclass(frozen=True, kw_only=True)
class WriteOptions(Target):
    batch: bool
    struct_columns: tuple[str, ...] = ()  # body / body_json given as a struct: sent as JSON (spark/bodies.py)

    @classmethod
    def parse(
        cls, options: Mapping[str, str], schema: Any, default_connection: Source | None = None, *, kind: str = "write"
    ) -> WriteOptions:
        from .schema import WRITE_COLUMNS

        check_known(options, kind)

        path = entity(options)
        if path.is_subscription or path.is_dead_letter:
            raise OptionError(f"servicebus: write to a queue or a topic, not {path}.")
        readable = set(RECORD_FIELDS)
        names = {f.name: f.dataType.simpleString() for f in schema.fields}
        structs = tuple(n for n in ("body", "body_json") if names.get(n, "").startswith("struct<"))
        if "body" not in names and "body_json" not in structs:
            raise OptionError(
                "servicebus: a write needs a 'body' column (string, binary, or a struct sent as JSON) or a "
                "'body_json' struct column; optional columns: "
                + ", ".join(c for c in WRITE_COLUMNS if c != "body")
                + "."
            )
        for name, kind in names.items():
            if name in structs or name == "_rescued_body":
                continue  # a struct body is sent as JSON; _rescued_body is what a json read could not parse
            allowed = WRITE_COLUMNS.get(name)
            if allowed is None:
                if name in readable:
                    continue  # read-only record fields (sequence_number, ...) are ignored
                raise OptionError(
                    f"servicebus: unknown column {name!r}; a write takes " + ", ".join(WRITE_COLUMNS) + "."
                )
            if not any(kind == a or kind.startswith(a + "(") for a in allowed):
                raise OptionError(f"servicebus: column {name!r} is {kind}; it must be {' or '.join(allowed)}.")
        parsed = cls(
            connection=connection(options, default_connection),
            entity=path,
            max_in_flight=int_option(options, "maxInFlight", 10, 1),
            batch=str(options.get("batch", "true")).lower() != "false",
            struct_columns=structs,
        )
        check_exists(parsed.connection, path, for_send=True)
        return parsed


def summary(opts: Any) -> dict[str, Any]:
    """What is safe to show (logs, errors): no connection string."""
    return {k: str(v) for k, v in vars(opts).items() if k != "connection"} | {"namespace": opts.connection.namespace}
