"""The settlement library: live connections, entity addresses, sends, scans, receives, settlement.

Everything above it (magics, widgets, the Spark data source) goes through this package.
It imports nothing from IPython, ipywidgets, plotly or Spark.

    conn = core.connect()                 # one live connection (the embedded emulator by default)
    core.send("orders", [{"n": 1}], connection=conn)
    core.peek("orders", max_messages=10, connection=conn).to_pandas()

Every function also takes ``connection=`` as a connection string or ``Connection`` settings (or
nothing: the documented resolution order); calls with the same settings share one live connection.

Where things are, top down: a part imports from its own line and the lines below it, never from
one above, and no two parts import each other (tests/project/test_folder_order.py reads the imports).
Each sub-package opens with its own map.

- ``incidents/``: purge, resubmit, discard, copy (whole entities moved, nothing lost or doubled);
- ``topology/``: what only reads a namespace: routing (``core.route``), a topic's rules, its
  entities exported;
- ``files/``: export and import as JSON lines, the state a resumed run reads;
- ``operations/``: peek, scan, tail, receive and settle, defer, process, sessions, send, one message
  copied, dead-letter triage, a message's journey, manage, counts;
- ``views/``: the record schema, search and its ``where``, dead-letter signatures;
- ``connections/``: where Service Bus is, credentials, the live connection, its loop and link pools;
- ``sdk/``: the SDK seam, the only modules that import ``azure.*``, and what an SDK failure means;
- at the bottom, for all of them: ``amqp_codec.py`` (AMQP values with their types, and their JSON),
  ``connection_string.py`` (the one connection-string grammar), ``defaults.py`` (the defaults the
  layers share, and the in-flight check), ``entities.py`` (addresses), ``errors.py`` (the kit's
  exceptions), ``outcome.py`` (the one result type), ``rates.py`` (the one rate grammar:
  ``parse_rate``, and the token bucket that holds a run to it), ``renames.py`` (old names for one
  release), ``times.py`` (the one time grammar: ``parse_time``, ``utc``; and ``Timed``, how long a
  piece of work has run), ``tracing.py`` (the kit's operations as OpenTelemetry spans, a copy's
  fresh trace context), ``trust.py`` (the CAs TLS trusts).

The layers above import only from ``sbnotebook.core`` itself (``__all__``), never from these modules.
"""

from .connections.connection import (
    ENV_CONNECTION_STRING,
    ENV_NAMESPACE,
    Connection,
    default_credential,
    resolve,
    tls_port_options,
)
from .connections.credentials import (
    CredentialRef,
    credential_of,
    is_secret_ref,
    parse_credential_ref,
    parse_secret_ref,
    read_secret,
)
from .connections.interrupts import interrupted
from .connections.live import LiveConnection
from .connections.registry import ConnectionLike, close_all, connect
from .connections.registry import live as live_connection
from .defaults import (
    MAX_HELD_BYTES,
    MAX_IN_FLIGHT,
    MAX_RENEWAL_SECONDS,
    MAX_SESSIONS,
    PEEK_MAX_MESSAGES,
    RECEIVE_MAX_MESSAGES,
    WAIT_SECONDS,
    check_max_in_flight,
    check_whole_number,
)
from .entities import CONNECTION_NAME, DEAD_LETTER_QUEUE, EntityPath, split_address
from .errors import (
    ConfigurationError,
    EntityNameError,
    EntityNotFoundError,
    InvalidInputError,
    LockLostError,
    MessageTooLargeError,
    PartlyDoneError,
    SbError,
    ServiceError,
    SessionLockedError,
    redact,
)
from .files.exporting import export_jsonl, export_resume_point
from .files.importing import import_jsonl, import_resume_point
from .files.jsonl import (
    count_jsonl,
    from_json_record,
    iter_jsonl,
    read_jsonl,
    to_json_record,
    write_jsonl,
)
from .incidents import playbook
from .incidents.brake import WATCH_INTERVAL, Brake, braked
from .incidents.canary import CANARY_TIMEOUT, Canary, CanaryFate
from .incidents.copy.api import CopyProgress, acopy, copy, copy_record, copy_resume_point, copy_target
from .incidents.copy.many import Match, acopy_many, copy_many, ensure_targets, glob_matches, is_glob, missing_targets
from .incidents.edits import MessageEdit, merge_patch
from .incidents.playbook import PlaybookError
from .incidents.purge.api import apurge, purge
from .incidents.resubmit.api import aresubmit, default_target, resubmit, resubmit_resume_point
from .incidents.resubmit.discard import adiscard, discard
from .operations import deferral
from .operations.batch import LockedBatch
from .operations.bounds import TimeWindow, snapshot, time_bounds
from .operations.copies import acopy_then_complete, copy_message, copy_then_complete
from .operations.counts import EntityCounts, counts, list_entities
from .operations.journey import Journey, journey
from .operations.manage import (
    RuleInfo,
    create_entity,
    create_rule,
    delete_entity,
    delete_rule,
    duration,
    entity_properties,
    list_rules,
    update_entity,
)
from .operations.peek import MAX_SCANNED, PeekPage, peek
from .operations.pipeline import RetryPolicy
from .operations.process import DeadLetter, Done, Policy, Retry, Skip, Stop, process
from .operations.receive import receive, receive_deferred
from .operations.scan import (
    PAGE_SIZE,
    ascan,
    peek_numbers,
    peek_page,
    scan,
    scan_records,
    sequence_numbers,
    sessions_refused,
)
from .operations.send import acancel_scheduled, aschedule, asend, cancel_scheduled, schedule, send
from .operations.sessions import (
    SessionInfo,
    count_session_states,
    get_session_state,
    list_sessions,
    pretty_state,
    set_session_state,
)
from .operations.tail import TAIL_INTERVAL, Tail, tail
from .operations.triage import GROUP_FIELDS, GroupCounts, group_counts, group_value
from .operations.triage import OTHER as GROUP_OTHER
from .operations.window import enqueued_window, scan_window
from .outcome import PROBLEMS, Outcome, Report
from .rates import RATE_FORMS, Rate, parse_rate
from .renames import deprecated, renamed
from .sdk.admin import emulator_admin_client
from .sdk.api import NEXT_AVAILABLE_SESSION
from .sdk.clients import rule_arguments, sdk_admin_client, sdk_client
from .sdk.failures import (
    SERVICE_ERRORS,
    is_entity_not_found,
    is_message_not_found,
    is_no_session_available,
    is_session_locked,
    is_unauthorized,
    requires_sessions,
)
from .times import FUTURE_TIME_FORMS, TIME_FORMS, parse_time, utc
from .topology.answer import RouteResult
from .topology.evaluator import RuleSpec
from .topology.listing import TopologyExport, export_topology
from .topology.route import route, topic_rules, typed_in
from .topology.rules import rules_from_admin, rules_from_config
from .tracing import operation as operation_span
from .views.records import FIELDS, RECORD_FIELDS, to_dataframe, to_record, utf8
from .views.search import as_where, compile_where, json_columns
from .views.signatures import mask, signature
from .views.where import Where, WhereFailed

__all__ = [
    "CANARY_TIMEOUT",
    "CONNECTION_NAME",
    "DEAD_LETTER_QUEUE",
    "ENV_CONNECTION_STRING",
    "ENV_NAMESPACE",
    "FIELDS",
    "FUTURE_TIME_FORMS",
    "GROUP_FIELDS",
    "GROUP_OTHER",
    "MAX_HELD_BYTES",
    "MAX_IN_FLIGHT",
    "MAX_RENEWAL_SECONDS",
    "MAX_SCANNED",
    "MAX_SESSIONS",
    "NEXT_AVAILABLE_SESSION",
    "PAGE_SIZE",
    "PEEK_MAX_MESSAGES",
    "PROBLEMS",
    "RATE_FORMS",
    "RECEIVE_MAX_MESSAGES",
    "RECORD_FIELDS",
    "SERVICE_ERRORS",
    "TAIL_INTERVAL",
    "TIME_FORMS",
    "WAIT_SECONDS",
    "WATCH_INTERVAL",
    "Brake",
    "Canary",
    "CanaryFate",
    "ConfigurationError",
    "Connection",
    "ConnectionLike",
    "CopyProgress",
    "CredentialRef",
    "DeadLetter",
    "Done",
    "EntityCounts",
    "EntityNameError",
    "EntityNotFoundError",
    "EntityPath",
    "GroupCounts",
    "InvalidInputError",
    "Journey",
    "LiveConnection",
    "LockLostError",
    "LockedBatch",
    "Match",
    "MessageEdit",
    "MessageTooLargeError",
    "Outcome",
    "PartlyDoneError",
    "PeekPage",
    "PlaybookError",
    "Policy",
    "Rate",
    "Report",
    "Retry",
    "RetryPolicy",
    "RouteResult",
    "RuleInfo",
    "RuleSpec",
    "SbError",
    "ServiceError",
    "SessionInfo",
    "SessionLockedError",
    "Skip",
    "Stop",
    "Tail",
    "TimeWindow",
    "TopologyExport",
    "Where",
    "WhereFailed",
    "acancel_scheduled",
    "acopy",
    "acopy_many",
    "acopy_then_complete",
    "adiscard",
    "apurge",
    "aresubmit",
    "as_where",
    "ascan",
    "aschedule",
    "asend",
    "braked",
    "cancel_scheduled",
    "check_max_in_flight",
    "check_whole_number",
    "close_all",
    "compile_where",
    "connect",
    "copy",
    "copy_many",
    "copy_message",
    "copy_record",
    "copy_resume_point",
    "copy_target",
    "copy_then_complete",
    "count_jsonl",
    "count_session_states",
    "counts",
    "create_entity",
    "create_rule",
    "credential_of",
    "default_credential",
    "default_target",
    "deferral",
    "delete_entity",
    "delete_rule",
    "deprecated",
    "discard",
    "duration",
    "emulator_admin_client",
    "enqueued_window",
    "ensure_targets",
    "entity_properties",
    "export_jsonl",
    "export_resume_point",
    "export_topology",
    "from_json_record",
    "get_session_state",
    "glob_matches",
    "group_counts",
    "group_value",
    "import_jsonl",
    "import_resume_point",
    "interrupted",
    "is_entity_not_found",
    "is_glob",
    "is_message_not_found",
    "is_no_session_available",
    "is_secret_ref",
    "is_session_locked",
    "is_unauthorized",
    "iter_jsonl",
    "journey",
    "json_columns",
    "list_entities",
    "list_rules",
    "list_sessions",
    "live_connection",
    "mask",
    "merge_patch",
    "missing_targets",
    "operation_span",
    "parse_credential_ref",
    "parse_rate",
    "parse_secret_ref",
    "parse_time",
    "peek",
    "peek_numbers",
    "peek_page",
    "playbook",
    "pretty_state",
    "process",
    "purge",
    "read_jsonl",
    "read_secret",
    "receive",
    "receive_deferred",
    "redact",
    "renamed",
    "requires_sessions",
    "resolve",
    "resubmit",
    "resubmit_resume_point",
    "route",
    "rule_arguments",
    "rules_from_admin",
    "rules_from_config",
    "scan",
    "scan_records",
    "scan_window",
    "schedule",
    "sdk_admin_client",
    "sdk_client",
    "send",
    "sequence_numbers",
    "sessions_refused",
    "set_session_state",
    "signature",
    "snapshot",
    "split_address",
    "tail",
    "time_bounds",
    "tls_port_options",
    "to_dataframe",
    "to_json_record",
    "to_record",
    "topic_rules",
    "typed_in",
    "update_entity",
    "utc",
    "utf8",
    "write_jsonl",
]

# Names public before 0.2.0, kept for one release (docs/names.md): each still works from here and says
# once what replaced it. Renamed constants, and names no layer above used nor any page named (private
# now, in the module given).
_OLD_NAMES = {
    "SEARCH_SCAN_LIMIT": ("operations.peek", "MAX_SCANNED", "core.MAX_SCANNED"),
    "COPY_CONCURRENCY": (
        "incidents.copy.api",
        None,
        "core.copy(max_in_flight=) (sends in flight; its peeks go one at a time)",
    ),
    "BOUND_WINDOW": ("operations.bounds", "BOUND_WINDOW", None),
    "GROUP_NONE": ("operations.triage", "NONE", None),
    "Field": ("views.records", "Field", None),
    "ImportProgress": ("files.importing", "ImportProgress", None),
    "SessionStates": ("operations.sessions", "SessionStates", None),
    "WindowBounds": ("operations.bounds", "WindowBounds", None),
    "filter_records": ("views.search", "filter_records", None),
    "is_credential_ref": ("connections.credentials", "is_credential_ref", None),
    "parse_connection_string": ("connection_string", "parse_connection_string", None),
}


def __getattr__(name: str) -> object:
    """``core.SEARCH_SCAN_LIMIT`` and the other old public names, for one release, each with a
    FutureWarning saying what replaced it (or that it is private now: where it lives)."""
    if name not in _OLD_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attribute, instead = _OLD_NAMES[name]
    private = f"sbnotebook.core.{module}.{attribute} (private: no longer part of core's API)"
    deprecated(f"core.{name}", instead or private)
    return 1 if attribute is None else getattr(importlib.import_module(f".{module}", __name__), attribute)
