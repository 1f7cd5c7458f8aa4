"""Data source options, checked on the driver before any job runs, with one clear message each."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core import RECORD_FIELDS, Connection, EntityNotFoundError, EntityPath, SbError, resolve
from ..core.connection import ENV_CONNECTION_STRING, ENV_NAMESPACE
from ..core.errors import redact
from ..core.live import live

log = logging.getLogger("sbnotebook.spark")
MODES = ("peek", "receive-and-delete", "defer")


class OptionError(ValueError):
    """A missing or bad option (raised on the driver, before Spark starts a job)."""


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
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


def _float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(str(raw))
    except ValueError:
        raise OptionError(f"servicebus: option {name} must be a number of seconds, not {raw!r}.") from None
    if value < 0:
        raise OptionError(f"servicebus: option {name} must be 0 or more.")
    return value


def connection(options: Mapping[str, str], default: Connection | None) -> Connection:
    """connectionString, else namespace (Entra ID), else what register() resolved in the notebook
    (its settings or its embedded emulator), else the environment. The data source runs in Spark's
    Python workers, never in the notebook's process, so it cannot start an emulator of its own."""
    text = options.get("connectionString")
    namespace = options.get("namespace")
    try:
        if text or namespace:
            return resolve(text or None, namespace=namespace or None)
        if default is not None:
            return default
        if os.environ.get(ENV_CONNECTION_STRING) or os.environ.get(ENV_NAMESPACE):
            return resolve()
    except SbError as exc:
        raise OptionError(f"servicebus: {redact(str(exc))}") from None
    raise OptionError(
        "servicebus: no connection: set the connectionString or namespace option, set "
        f"{ENV_CONNECTION_STRING}, or call sbnotebook.spark.register(spark) in the notebook "
        "(it passes the notebook's connection, the embedded emulator by default)."
    )


def entity(options: Mapping[str, str]) -> EntityPath:
    name = options.get("entity")
    if not name:
        raise OptionError(
            "servicebus: the 'entity' option is required, for example .option('entity', 'orders') or "
            "'events/subscriptions/audit' (add '/$deadletterqueue' for a dead-letter queue)."
        )
    try:
        return EntityPath.parse(name)
    except SbError as exc:
        raise OptionError(f"servicebus: {exc}") from None


def check_exists(conn: Connection, path: EntityPath, *, for_send: bool) -> None:
    """Fail early on an entity that does not exist. Without management rights the check is skipped:
    a send-only or listen-only key must still work."""
    try:
        admin = live(conn).admin()
        if path.is_subscription:
            admin.get_subscription(path.name, path.subscription)
        elif for_send:
            try:
                admin.get_queue(path.name)
            except Exception as exc:
                if type(exc).__name__ != "ResourceNotFoundError":
                    raise
                admin.get_topic(path.name)
        else:
            admin.get_queue(path.name)
    except Exception as exc:
        if type(exc).__name__ == "ResourceNotFoundError":
            raise OptionError(f"servicebus: entity not found: {path}") from None
        if isinstance(exc, EntityNotFoundError):
            raise OptionError(f"servicebus: {exc}") from None
        # No management rights (or no admin endpoint): the read or write itself will report a missing entity.
        log.info("servicebus: could not check that %s exists (%s); going on", path, redact(str(exc)).splitlines()[0])


@dataclass(frozen=True)
class ReadOptions:
    connection: Connection
    entity: EntityPath
    mode: str
    max_messages: int | None
    num_partitions: int
    from_sequence_number: int
    max_in_flight: int
    wait_seconds: float

    @classmethod
    def parse(
        cls, options: Mapping[str, str], default_partitions: int, default_connection: Connection | None = None
    ) -> ReadOptions:
        mode = (options.get("mode") or "peek").strip().lower()
        if mode not in MODES:
            raise OptionError(f"servicebus: option mode must be one of {', '.join(MODES)}, not {mode!r}.")
        path = entity(options)
        max_messages = _int(options, "maxMessages", None, 1)
        if mode != "peek" and max_messages is None:
            max_messages = 1000  # a destructive read always has a bound
        parsed = cls(
            connection=connection(options, default_connection),
            entity=path,
            mode=mode,
            max_messages=max_messages,
            num_partitions=_int(options, "numPartitions", default_partitions, 1) or 1,
            from_sequence_number=_int(options, "fromSequenceNumber", 1, 0) or 1,
            max_in_flight=_int(options, "maxInFlight", 10, 1) or 10,
            wait_seconds=_float(options, "waitSeconds", 5.0),
        )
        check_exists(parsed.connection, path.parent, for_send=False)
        return parsed


@dataclass(frozen=True)
class WriteOptions:
    connection: Connection
    entity: EntityPath
    max_in_flight: int
    batch: bool

    @classmethod
    def parse(
        cls, options: Mapping[str, str], schema: Any, default_connection: Connection | None = None
    ) -> WriteOptions:
        from .schema import WRITE_COLUMNS

        path = entity(options)
        if path.is_subscription or path.is_dead_letter:
            raise OptionError(f"servicebus: write to a queue or a topic, not {path}.")
        readable = set(RECORD_FIELDS)
        names = {f.name: f.dataType.simpleString() for f in schema.fields}
        if "body" not in names:
            raise OptionError(
                "servicebus: a write needs a 'body' column (string or binary); optional columns: "
                + ", ".join(c for c in WRITE_COLUMNS if c != "body")
                + "."
            )
        for name, kind in names.items():
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
            max_in_flight=_int(options, "maxInFlight", 10, 1) or 10,
            batch=str(options.get("batch", "true")).lower() != "false",
        )
        check_exists(parsed.connection, path, for_send=True)
        return parsed


def summary(opts: Any) -> dict[str, Any]:
    """What is safe to show (logs, errors): no connection string."""
    return {k: str(v) for k, v in vars(opts).items() if k != "connection"} | {"namespace": opts.connection.namespace}
