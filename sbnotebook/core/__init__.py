"""The settlement library: live connections, entity addresses, sends, scans, receives, settlement.

Everything above it (magics, widgets, the Spark data source) goes through this package.
It imports nothing from IPython, ipywidgets, plotly or Spark.

    conn = core.connect()                 # one live connection (the embedded emulator by default)
    core.send("orders", [{"n": 1}], connection=conn)
    core.peek("orders", max_messages=10, connection=conn).to_pandas()

Every function also takes ``connection=`` as a connection string or ``Connection`` settings (or
nothing: the documented resolution order); calls with the same settings share one live connection.
"""

from . import deferral
from .batch import LockedBatch
from .bounds import BOUND_WINDOW, TimeWindow, WindowBounds, snapshot, time_bounds
from .connection import ENV_CONNECTION_STRING, ENV_NAMESPACE, Connection, parse_connection_string, resolve
from .copies import acopy_then_complete, copy_message, copy_then_complete
from .copying import COPY_CONCURRENCY, CopyProgress, acopy, copy, copy_record, copy_resume_point, copy_target
from .counts import EntityCounts, counts, list_entities
from .credentials import (
    CredentialRef,
    credential_of,
    is_credential_ref,
    is_secret_ref,
    parse_credential_ref,
    parse_secret_ref,
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
    is_message_not_found,
    is_no_session_available,
    is_session_locked,
    is_unauthorized,
    redact,
    requires_sessions,
)
from .exporting import export_jsonl, export_resume_point
from .importing import ImportProgress, import_jsonl, import_resume_point
from .jsonl import (
    count_jsonl,
    from_json_record,
    iter_jsonl,
    read_jsonl,
    to_json_record,
    write_jsonl,
)
from .live import LiveConnection
from .manage import (
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
from .outcome import PROBLEMS, Outcome, Report
from .peek import SEARCH_SCAN_LIMIT, PeekPage, peek
from .pipeline import RetryPolicy
from .process import DeadLetter, Done, Policy, Retry, Skip, Stop, process
from .purge import apurge, purge
from .receive import receive, receive_deferred
from .records import FIELDS, RECORD_FIELDS, Field, to_dataframe, to_record, utf8
from .registry import ConnectionLike, close_all, connect
from .registry import live as live_connection
from .renames import deprecated
from .resubmit import aresubmit, default_target, discard, resubmit
from .scan import (
    PAGE_SIZE,
    ascan,
    peek_numbers,
    peek_page,
    scan,
    scan_records,
    sequence_numbers,
    sessions_refused,
)
from .search import compile_where, filter_records, json_columns
from .send import acancel_scheduled, aschedule, asend, cancel_scheduled, schedule, send
from .sessions import (
    SessionInfo,
    SessionStates,
    count_session_states,
    get_session_state,
    list_sessions,
    pretty_state,
    set_session_state,
)
from .signatures import mask, signature
from .tail import TAIL_INTERVAL, Tail, tail
from .triage import GROUP_FIELDS, GroupCounts, group_counts, group_value
from .triage import NONE as GROUP_NONE
from .triage import OTHER as GROUP_OTHER

__all__ = [
    "BOUND_WINDOW",
    "CONNECTION_NAME",
    "COPY_CONCURRENCY",
    "DEAD_LETTER_QUEUE",
    "ENV_CONNECTION_STRING",
    "ENV_NAMESPACE",
    "FIELDS",
    "GROUP_FIELDS",
    "GROUP_NONE",
    "GROUP_OTHER",
    "PAGE_SIZE",
    "PROBLEMS",
    "RECORD_FIELDS",
    "SEARCH_SCAN_LIMIT",
    "TAIL_INTERVAL",
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
    "Field",
    "GroupCounts",
    "ImportProgress",
    "InvalidInputError",
    "LiveConnection",
    "LockLostError",
    "LockedBatch",
    "MessageTooLargeError",
    "Outcome",
    "PartlyDoneError",
    "PeekPage",
    "Policy",
    "Report",
    "Retry",
    "RetryPolicy",
    "RuleInfo",
    "SbError",
    "ServiceError",
    "SessionInfo",
    "SessionLockedError",
    "SessionStates",
    "Skip",
    "Stop",
    "Tail",
    "TimeWindow",
    "WindowBounds",
    "acancel_scheduled",
    "acopy",
    "acopy_then_complete",
    "apurge",
    "aresubmit",
    "ascan",
    "aschedule",
    "asend",
    "cancel_scheduled",
    "close_all",
    "compile_where",
    "connect",
    "copy",
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
    "default_target",
    "deferral",
    "delete_entity",
    "delete_rule",
    "deprecated",
    "discard",
    "duration",
    "entity_properties",
    "export_jsonl",
    "export_resume_point",
    "filter_records",
    "from_json_record",
    "get_session_state",
    "group_counts",
    "group_value",
    "import_jsonl",
    "import_resume_point",
    "is_credential_ref",
    "is_message_not_found",
    "is_no_session_available",
    "is_secret_ref",
    "is_session_locked",
    "is_unauthorized",
    "iter_jsonl",
    "json_columns",
    "list_entities",
    "list_rules",
    "list_sessions",
    "live_connection",
    "mask",
    "parse_connection_string",
    "parse_credential_ref",
    "parse_secret_ref",
    "peek",
    "peek_numbers",
    "peek_page",
    "pretty_state",
    "process",
    "purge",
    "read_jsonl",
    "receive",
    "receive_deferred",
    "redact",
    "requires_sessions",
    "resolve",
    "resubmit",
    "scan",
    "scan_records",
    "schedule",
    "send",
    "sequence_numbers",
    "sessions_refused",
    "set_session_state",
    "signature",
    "snapshot",
    "split_address",
    "tail",
    "time_bounds",
    "to_dataframe",
    "to_json_record",
    "to_record",
    "update_entity",
    "utf8",
    "write_jsonl",
]
