"""Data source option names and values: the names each kind of read and write knows (one table), and
one parser per kind of value (a count, seconds, a time, the connection, the entity), each refusing a
bad value with one clear message, on the driver before any job runs. What a read, a stream or a write
was given is parsed with these in ``spec.py``."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any, overload

from ..core import (
    DEAD_LETTER_QUEUE,
    ENV_CONNECTION_STRING,
    ENV_NAMESPACE,
    MAX_IN_FLIGHT,
    EntityPath,
    InvalidInputError,
    SbError,
    TimeWindow,
    check_max_in_flight,
    deprecated,
    parse_rate,
    parse_time,
    redact,
    resolve,
)
from .secrets import Source, entra_ref, over_websockets, parse_ref


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
    "credentialRef",
    "websockets",
    "trace",  # the SDK's OpenTelemetry spans too, in each Spark process (core.connect(trace=True))
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
        "pushFilters",
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
        "sessionIds",
        "waitSeconds",
        "maxInFlight",
        "bodySampleFromSequenceNumber",
        *_BODY,
    ),
    "write": (*_WHERE, "maxInFlight", "onePerSend", "ratePerPartition"),
    # checkpointLocation: Spark's own, passed along
    "stream write": (*_WHERE, "maxInFlight", "onePerSend", "ratePerPartition", "checkpointLocation"),
}
SPARK_OWN = ("path",)  # what Spark adds itself (`.load(path)`): not refused here, said by `entity` checks
# Old names kept for one release, per kind: old -> new (docs/names.md). Taken, never suggested; each
# says once that it is now the new name (``option``).
# `namespace` is Spark's own word for a catalog's schema: the option says the SDK's word.
RENAMED_OPTIONS: dict[str, dict[str, str]] = {
    "read": {"namespace": "fullyQualifiedNamespace"},
    "stream": {
        "sessionId": "sessionIds",
        "namespace": "fullyQualifiedNamespace",
        "fromSequenceNumber": "bodySampleFromSequenceNumber",  # a stream starts at no number
    },
    "write": {"namespace": "fullyQualifiedNamespace", "batch": "onePerSend"},
    "stream write": {"namespace": "fullyQualifiedNamespace", "batch": "onePerSend"},
}
# Old names whose new name says the opposite: the old value is taken turned (batch=false is onePerSend=true).
OPPOSITES = {("batch", "onePerSend")}
# Names a kind refuses with what to give instead, said by check_known in place of a closest name.
# A write's tasks cannot see one another, so no option of theirs can hold the whole write to one rate.
INSTEAD: dict[str, dict[str, str]] = {
    "write": {
        "rate": "its tasks cannot see one another, so none of them can keep the whole write to one rate: "
        "give it to sbspark.write(df, entity, rate=...), which splits it among the tasks it makes, "
        "or give each task's rate as ratePerPartition",
    },
    "stream write": {
        "rate": "its tasks cannot see one another, so none of them can keep the whole write to one rate: "
        "give each task's rate as ratePerPartition (the write's is that times the tasks at once)",
    },
}


def check_known(options: Mapping[str, str], *kinds: str) -> None:
    """Refuse an option none of these kinds of read or write knows, naming the closest known one (or,
    for a name in ``INSTEAD``, what to give instead): a misspelt `maxMessages` must not fall back to
    the default (it would delete up to 1,000, not 10)."""
    import difflib

    known = tuple(dict.fromkeys(k for kind in kinds for k in KNOWN_OPTIONS[kind]))
    kind = " or ".join(kinds)
    lowered = {k.lower(): k for k in known}
    old = {o.lower() for kind_ in kinds for o in RENAMED_OPTIONS.get(kind_, {})}
    instead = {name.lower(): why for kind_ in kinds for name, why in INSTEAD.get(kind_, {}).items()}
    for given in options:
        key = str(given)
        if key.lower() in lowered or key.lower() in SPARK_OWN or key.lower() in old:
            continue
        if key.lower() in instead:
            raise OptionError(f"servicebus: a {kind} takes no option {key!r}: {instead[key.lower()]}.")
        elsewhere = [
            k for k, names in KNOWN_OPTIONS.items() if k not in kinds and key.lower() in {n.lower() for n in names}
        ]
        note = f" (an option of a {' and a '.join(elsewhere)})" if elsewhere else ""
        close = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
        hint = f": did you mean {lowered[close[0]]}?" if close else f"; known: {', '.join(known)}"
        raise OptionError(f"servicebus: unknown option {key!r} for a {kind}{note}{hint}")


def option(options: Mapping[str, str], name: str, kind: str | None) -> str | None:
    """The value of option ``name`` of a ``kind`` of read or write (None: an option every kind
    shares), given by its name or by its old one (RENAMED_OPTIONS: it still works, and says once
    what replaced it); both at once is refused."""
    value = options.get(name)
    renamed = (
        RENAMED_OPTIONS.get(kind, {})
        if kind is not None
        else {k: v for r in RENAMED_OPTIONS.values() for k, v in r.items()}
    )
    for old, new in renamed.items():
        if new == name and options.get(old) is not None:
            if value is not None:
                raise OptionError(f"servicebus: option {new} is given twice: as {new} and as {old} (its old name).")
            value = options.get(old)
            if (old, new) in OPPOSITES:
                value = {"true": "false", "false": "true"}.get(str(value).strip().lower(), value)
            deprecated(f"the Spark option {old}", f"{new}={value}" if (old, new) in OPPOSITES else new, stacklevel=3)
    return value


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


def in_flight_option(options: Mapping[str, str]) -> int:
    """``maxInFlight``, for every kind that takes it: ``core.MAX_IN_FLIGHT`` when not given, else
    checked by the kit's one check of an in-flight limit (``core.check_max_in_flight``)."""
    raw = options.get("maxInFlight")
    if raw is None or str(raw).strip() == "":
        return MAX_IN_FLIGHT
    text = str(raw).strip()
    try:
        return check_max_in_flight(int(text) if text.lstrip("+-").isdigit() else text, "option maxInFlight")
    except InvalidInputError as exc:
        raise OptionError(f"servicebus: {exc.message}") from None


def rate_option(options: Mapping[str, str], name: str) -> float | None:
    """A rate in core's one grammar (``core.parse_rate``: ``50/s``, ``3000/m``), messages per second;
    None when not given; anything else refused, naming the option."""
    raw = options.get(name)
    if raw is None or not str(raw).strip():
        return None
    try:
        return parse_rate(str(raw).strip(), name=f"option {name}")
    except InvalidInputError as exc:
        raise OptionError(f"servicebus: {exc.message}") from None


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


def list_option(options: Mapping[str, str], name: str) -> tuple[str, ...] | None:
    """A comma-separated list (``a, b,c``): each item once, in the order given; None when not given."""
    raw = options.get(name)
    if raw is None or not str(raw).strip():
        return None
    return tuple(dict.fromkeys(s.strip() for s in str(raw).split(",") if s.strip()))


def time_option(options: Mapping[str, str], name: str, now: dt.datetime | None = None) -> dt.datetime | None:
    """An enqueued-time bound in core's one grammar (``core.parse_time``, docs/names.md Times): ISO
    8601 (``2026-11-25``, ``2026-11-25T08:00:00+01:00``; without a zone it is UTC, as Service Bus's
    times) or an age (``2h``: that long before ``now``, on the driver as the read is planned)."""
    raw = options.get(name)
    if raw is None or not str(raw).strip():
        return None
    try:
        return parse_time(str(raw), name=f"option {name}", now=now)
    except InvalidInputError as exc:
        raise OptionError(f"servicebus: {exc.message}") from None


def time_window(options: Mapping[str, str]) -> TimeWindow | None:
    now = dt.datetime.now(dt.UTC)  # both ends' ages from one instant
    after, before = time_option(options, "enqueuedAfter", now), time_option(options, "enqueuedBefore", now)
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


def bool_option(options: Mapping[str, str], name: str, default: bool = False) -> bool:
    """``true`` or ``false`` (any case; not given: ``default``; given by its old name: ``option``);
    anything else is refused, naming the option."""
    given = option(options, name, None)
    raw = str(default if given is None else given).strip().lower()
    if raw not in ("true", "false"):
        raise OptionError(f"servicebus: option {name} must be true or false, not {given!r}.")
    return raw == "true"


def _where(options: Mapping[str, str], default: Source | None) -> Source:
    """secretRef (resolved later, where the connection is used), else fullyQualifiedNamespace (Entra
    ID: with credentialRef, a credential each process makes itself; without, DefaultAzureCredential),
    else connectionString, else what register() resolved in the notebook (its settings, its
    reference or its embedded emulator), else the environment. The data source runs in Spark's
    Python workers, never in the notebook's process, so it cannot start an emulator of its own."""
    ref = options.get("secretRef")
    text = options.get("connectionString")
    namespace = option(options, "fullyQualifiedNamespace", None)
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
            return resolve(text or None, fully_qualified_namespace=namespace or None)
        if default is not None:
            return default
        if os.environ.get(ENV_CONNECTION_STRING) or os.environ.get(ENV_NAMESPACE):
            return resolve()
    except SbError as exc:
        text = redact(str(exc))
        raise OptionError(text if text.startswith("servicebus:") else f"servicebus: {text}") from None
    raise OptionError(
        "servicebus: no connection: set the secretRef option (env:VARIABLE or secret:scope/key), "
        "fullyQualifiedNamespace (with credentialRef callable:module:function or service-credential:NAME, else "
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


def summary(opts: Any) -> dict[str, Any]:
    """What is safe to show (logs, errors): no connection string."""
    shown = {k: str(v) for k, v in vars(opts).items() if k != "connection"}
    return shown | {"namespace": opts.connection.fully_qualified_namespace}
