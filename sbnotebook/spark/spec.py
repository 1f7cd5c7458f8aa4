"""What a read, a stream or a write of the data source was given, parsed once (option names and
their values: ``options.py``).

A read's or a stream's options (read, body and stream options) are one :class:`ReadSpec`: the data
source keeps it and hands it to ``schema()``, ``reader()`` and ``streamReader()``, which ask it for
what they need; each option is parsed once, when first asked for, and the entity is checked to exist
through core (:func:`check_exists`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Self, TypeVar

from ..core import (
    PAGE_SIZE,
    RECORD_FIELDS,
    WAIT_SECONDS,
    Connection,
    EntityNotFoundError,
    EntityPath,
    SbError,
    TimeWindow,
    connect,
    deprecated,
    entity_properties,
    redact,
)
from .options import (
    OptionError,
    bool_option,
    check_known,
    connection,
    entity,
    float_option,
    in_flight_option,
    int_option,
    list_option,
    option,
    rate_option,
    time_window,
)
from .secrets import EntraRef, SecretRef, Source, connection_of

log = logging.getLogger("sbnotebook.spark")
MODES = ("peek", "receive_and_delete", "defer")
OLD_MODES = {"receive-and-delete": "receive_and_delete"}  # kept for one release (docs/names.md)
DESTRUCTIVE_BOUND = 1000  # maxMessages of a receive-and-delete or defer read that gives none: always a bound
ALL_SESSIONS = "*"  # sessionIds: every session (a stream reads them one after another)
DEFAULT_PER_TRIGGER = 1000  # messages per micro-batch when maxMessagesPerTrigger is not given
FORMATS = ("binary", "text", "json")  # bodyFormat
DEFAULT_SAMPLE = PAGE_SIZE  # bodies peeked to infer a schema: one peek page, one round trip
MAX_SAMPLE = 10_000


def _read_sessions(ids: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """A batch read's sessionIds: these sessions; ``*`` (or none given) every session."""
    if ids is not None and ALL_SESSIONS in ids:
        if len(ids) > 1:
            raise OptionError("servicebus: option sessionIds is * (every session) or session ids, not both.")
        return None
    return ids


def _stream_session(raw: str | None) -> str | None:
    """A stream's sessionIds: one session id, or ``*`` for every session, one after another."""
    ids = [s.strip() for s in str(raw or "").split(",") if s.strip()]
    if len(ids) > 1:
        raise OptionError(
            "servicebus: option sessionIds of a stream is one session id, or * for every session one after "
            f"another, not {len(ids)} ids (a batch read takes several)."
        )
    return ids[0] if ids else None


def _check_pushdown(mode: str) -> None:
    """pushFilters=true is possible: a peek read, on a pyspark that hands filters to a Python data
    source (4.1+: ``DataSourceReader.pushFilters``; 4.0, Databricks 17.3 LTS, has none)."""
    import pyspark
    from pyspark.sql.datasource import DataSourceReader

    if not hasattr(DataSourceReader, "pushFilters"):
        raise OptionError(
            f"servicebus: option pushFilters needs pyspark 4.1 or later (this is {pyspark.__version__}, which "
            "hands no filters to a Python data source): give the window as enqueuedAfter / enqueuedBefore."
        )
    if mode != "peek":
        raise OptionError(
            f"servicebus: option pushFilters bounds a peek read, not mode={mode} "
            "(a receive takes messages in the order they come)."
        )


def check_exists(source: Source, path: EntityPath) -> bool | None:
    """Fail early on an entity that does not exist (through core's administration API); says whether
    a queue or subscription requires sessions (None when unknown, and for a topic: a write sends to
    it; a read of it fails at the read, as Service Bus receives from its subscriptions only). Without
    management rights the check is skipped: a send-only or listen-only key must still work. A
    reference this process cannot resolve (a Spark Connect client: the server and its executors hold
    the secret or the service credential) is checked where it is used instead."""
    if isinstance(source, (SecretRef, EntraRef)):
        try:
            conn = connection_of(source)
        except SbError as exc:
            log.info("servicebus: not checking %s here: %s", path, exc)
            return None
    else:
        conn = source
    try:
        found = entity_properties(path, connection=conn)
    except EntityNotFoundError:
        raise OptionError(f"servicebus: entity not found: {path}") from None
    except SbError as exc:
        # No management rights (or no admin endpoint): the read or write itself will report a missing entity.
        log.info("servicebus: could not check that %s exists (%s); going on", path, redact(str(exc)).splitlines()[0])
        return None
    return None if found["kind"] == "topic" else bool(found.get("requires_session"))


@dataclass(frozen=True)
class BodyOptions:
    """bodyFormat, bodySchema and bodySampleSize (what they do: ``bodies.py``)."""

    format: str = "binary"
    schema: str | None = None  # bodySchema as given (DDL: "a bigint, b struct<c: string>")
    sample: int = DEFAULT_SAMPLE

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> BodyOptions:
        fmt = str(options.get("bodyFormat") or "binary").strip().lower()
        if fmt not in FORMATS:
            raise OptionError(f"servicebus: option bodyFormat must be one of {', '.join(FORMATS)}, not {fmt!r}.")
        given = (options.get("bodySchema") or "").strip() or None
        if given and fmt != "json":
            raise OptionError("servicebus: option bodySchema needs bodyFormat=json.")
        raw = options.get("bodySampleSize")
        sample = DEFAULT_SAMPLE
        if raw is not None and str(raw).strip():
            try:
                sample = int(str(raw).strip())
            except ValueError:
                raise OptionError(f"servicebus: option bodySampleSize must be a whole number, not {raw!r}.") from None
            if not 1 <= sample <= MAX_SAMPLE:
                raise OptionError(f"servicebus: option bodySampleSize must be 1 to {MAX_SAMPLE}, not {sample}.")
        return cls(fmt, given, sample)


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where every read and write goes, and how many operations it keeps in flight."""

    connection: Source
    entity: EntityPath
    max_in_flight: int
    trace: bool = False  # the trace option: the SDK's spans too, in every process that runs this

    def conn(self) -> Connection:
        """The connection, a secret reference resolved in this process (planner, driver or executor);
        with ``trace``, its live connection here traces the SDK's operations too (``core.connect(trace=True)``)."""
        settings = connection_of(self.connection)
        if self.trace:
            connect(settings, trace=True, warm=False)
        return settings


@dataclass(frozen=True, kw_only=True)
class ReadingOptions(Target):
    """What a batch read and a stream both take; each adds its own (:meth:`ReadSpec.read`, :meth:`ReadSpec.stream`)."""

    num_partitions: int
    wait_seconds: float


@dataclass(frozen=True, kw_only=True)
class ReadOptions(ReadingOptions):
    mode: str
    max_messages: int | None
    from_sequence_number: int
    sessions: tuple[str, ...] | None = None  # the sessionIds option: these sessions only
    session_enabled: bool = False  # the entity requires sessions: read session by session
    window: TimeWindow | None = None  # enqueuedAfter / enqueuedBefore (peek only), narrowed by pushed filters
    push_filters: bool = False  # pushFilters: take time (and sequence number) bounds from Spark's filters
    to_sequence_number: int | None = None  # a pushed-down `sequence_number <=`: the highest number read


@dataclass(frozen=True, kw_only=True)
class StreamOptions(ReadingOptions):
    max_per_trigger: int
    session: str | None  # None: the entity has no sessions; a session id; or "*": every session


R = TypeVar("R", bound=ReadingOptions)


class ReadSpec:
    """The options of one read or stream, each parsed once, when first asked for (what was parsed is
    kept: Spark pickles the data source, and this with it, from the process that ran ``schema()`` to
    the one that runs ``reader()``). Asking when needed keeps each error where it is said: ``schema()``
    asks for the body options (and, to infer a body schema, the entity, the connection and
    fromSequenceNumber), :meth:`read` and :meth:`stream` for the rest, after checking the option names
    of their kind. Holds no client: what runs on executors opens its own."""

    def __init__(self, options: Mapping[str, str], default_partitions: int, default_connection: Source | None) -> None:
        self.options = options
        self.default_partitions = default_partitions
        self.default_connection = default_connection

    @cached_property
    def body(self) -> BodyOptions:
        return BodyOptions.parse(self.options)

    @cached_property
    def entity(self) -> EntityPath:
        return entity(self.options)

    @cached_property
    def connection(self) -> Source:
        return connection(self.options, self.default_connection)

    @cached_property
    def from_sequence_number(self) -> int:
        return int_option(self.options, "fromSequenceNumber", 1, 0)

    @cached_property
    def body_sample_from(self) -> int:
        """Where the bodies sampled for a JSON schema start: a stream's bodySampleFromSequenceNumber
        (its old name there: fromSequenceNumber), a read's fromSequenceNumber (where the read starts)."""
        given = int_option(self.options, "bodySampleFromSequenceNumber", None, 0)
        return self.from_sequence_number if given is None else given

    def read(self) -> ReadOptions:
        """A batch read's options, checked against the entity (sessions, existence) before any job runs."""
        options = self.options
        check_known(options, "read")
        mode = (options.get("mode") or "peek").strip().lower()
        if mode in OLD_MODES:
            deprecated(f"the Spark option mode={mode}", f"mode={OLD_MODES[mode]}", stacklevel=2)
            mode = OLD_MODES[mode]
        if mode not in MODES:
            raise OptionError(f"servicebus: option mode must be one of {', '.join(MODES)}, not {mode!r}.")
        path = self.entity  # a missing entity is the first thing to say
        window = time_window(options)
        if window is not None and mode != "peek":
            raise OptionError(
                f"servicebus: options enqueuedAfter and enqueuedBefore bound a peek read, not mode={mode} "
                "(a receive takes messages in the order they come)."
            )
        push_filters = bool_option(options, "pushFilters")
        if push_filters:
            _check_pushdown(mode)
        max_messages = int_option(options, "maxMessages", None, 1)
        if mode != "peek" and max_messages is None:
            max_messages = DESTRUCTIVE_BOUND
        parsed, requires_session = self._reading(
            ReadOptions,
            wait_seconds=WAIT_SECONDS,
            mode=mode,
            max_messages=max_messages,
            from_sequence_number=self.from_sequence_number,
            sessions=_read_sessions(list_option(options, "sessionIds")),
            window=window,
            push_filters=push_filters,
        )
        session_enabled = bool(requires_session) and path.sub_queue is None  # dead-letter queues have none
        if parsed.sessions and requires_session is False:
            raise OptionError(f"servicebus: option sessionIds: {path} does not require sessions.")
        if parsed.sessions and path.sub_queue is not None:
            raise OptionError(f"servicebus: option sessionIds: {path} is a dead-letter queue, which has no sessions.")
        session_enabled = session_enabled or bool(parsed.sessions)
        if session_enabled and mode == "defer":
            raise OptionError(
                f"servicebus: {path} requires sessions, and mode=defer does not support them (a deferred session "
                "message can be settled only by a receiver holding its session): use peek or receive_and_delete."
            )
        return replace(parsed, session_enabled=session_enabled)

    def stream(self) -> StreamOptions:
        """A stream's options, its entity checked to exist before the query starts."""
        options = self.options
        check_known(options, "stream")
        _ = self.entity  # a missing entity is the first thing to say
        if options.get("mode"):
            raise OptionError("servicebus: a stream always reads in peek-lock and settles after commit; drop 'mode'.")
        # fromSequenceNumber never said where a stream starts (it takes what is there and what arrives):
        # on a stream it is bodySampleFromSequenceNumber's old name (schema() read it), said once here.
        option(options, "bodySampleFromSequenceNumber", "stream")
        return self._reading(
            StreamOptions,
            wait_seconds=1.0,
            max_per_trigger=int_option(options, "maxMessagesPerTrigger", DEFAULT_PER_TRIGGER, 1),
            session=_stream_session(option(options, "sessionIds", "stream")),
        )[0]

    def _reading(self, kind: type[R], *, wait_seconds: float, **own: Any) -> tuple[R, bool | None]:
        """The options every read takes, with this kind's `own`, and whether the entity requires
        sessions (None when unknown), checked once, before any job runs."""
        options = self.options
        parsed = kind(
            connection=self.connection,
            entity=self.entity,
            max_in_flight=in_flight_option(options),
            num_partitions=int_option(options, "numPartitions", self.default_partitions, 1),
            wait_seconds=float_option(options, "waitSeconds", wait_seconds),
            trace=bool_option(options, "trace"),
            **own,
        )
        return parsed, check_exists(parsed.connection, parsed.entity.parent)


@dataclass(frozen=True, kw_only=True)
class WriteOptions(Target):
    one_per_send: bool
    struct_columns: tuple[str, ...] = ()  # body / body_json given as a struct: sent as JSON (spark/bodies.py)
    # ratePerPartition: messages per second each task sends at most (a task cannot see the others')
    rate_per_partition: float | None = None

    @classmethod
    def parse(
        cls, options: Mapping[str, str], schema: Any, default_connection: Source | None = None, *, kind: str = "write"
    ) -> Self:
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
            max_in_flight=in_flight_option(options),
            one_per_send=bool_option(options, "onePerSend", default=False),
            struct_columns=structs,
            rate_per_partition=rate_option(options, "ratePerPartition"),
            trace=bool_option(options, "trace"),
        )
        check_exists(parsed.connection, path)
        return parsed
