"""The settlement library: live connections, entity addresses, sends, scans, receives, settlement.

Everything above it (magics, widgets, the Spark data source) goes through this package.
It imports nothing from IPython, ipywidgets, plotly or Spark.

    conn = core.connect()                 # one live connection (the embedded emulator by default)
    core.send("orders", [{"n": 1}], connection=conn)
    core.peek("orders", count=10, connection=conn).to_pandas()

Every function also takes ``connection=`` as a connection string or ``Connection`` settings (or
nothing: the documented resolution order); calls with the same settings share one live connection.
"""

from . import deferral
from .connection import Connection, parse_connection_string, resolve
from .counts import EntityCounts, counts, list_entities
from .entities import EntityPath
from .errors import (
    ConfigurationError,
    EntityNameError,
    EntityNotFoundError,
    InvalidInputError,
    LockLostError,
    MessageTooLargeError,
    SbError,
    ServiceError,
    SessionLockedError,
    redact,
)
from .jsonl import export_jsonl, import_jsonl
from .live import LiveConnection, close_all, connect
from .manage import (
    RuleInfo,
    create_entity,
    create_rule,
    delete_entity,
    delete_rule,
    entity_properties,
    list_rules,
    update_entity,
)
from .outcome import Outcome, Report
from .peek import PeekPage, peek
from .process import DeadLetter, Done, Policy, Retry, Skip, Stop, process
from .purge import apurge, purge
from .receive import LockedBatch, receive, receive_deferred
from .records import FIELDS, RECORD_FIELDS, Field, to_dataframe, to_record
from .resubmit import aresubmit, copy_message, discard, resubmit
from .scan import PAGE_SIZE, ascan, scan, scan_records, sequence_numbers
from .search import compile_where, filter_records, json_columns
from .send import RetryPolicy, acancel_scheduled, aschedule, asend, cancel_scheduled, schedule, send
from .sessions import SessionInfo, get_session_state, list_sessions, set_session_state
from .triage import GROUP_FIELDS, GroupCounts, group_counts

__all__ = [
    "FIELDS",
    "GROUP_FIELDS",
    "PAGE_SIZE",
    "RECORD_FIELDS",
    "ConfigurationError",
    "Connection",
    "DeadLetter",
    "Done",
    "EntityCounts",
    "EntityNameError",
    "EntityNotFoundError",
    "EntityPath",
    "Field",
    "GroupCounts",
    "InvalidInputError",
    "LiveConnection",
    "LockLostError",
    "LockedBatch",
    "MessageTooLargeError",
    "Outcome",
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
    "Skip",
    "Stop",
    "acancel_scheduled",
    "apurge",
    "aresubmit",
    "ascan",
    "aschedule",
    "asend",
    "cancel_scheduled",
    "close_all",
    "compile_where",
    "connect",
    "copy_message",
    "counts",
    "create_entity",
    "create_rule",
    "deferral",
    "delete_entity",
    "delete_rule",
    "discard",
    "entity_properties",
    "export_jsonl",
    "filter_records",
    "get_session_state",
    "group_counts",
    "import_jsonl",
    "json_columns",
    "list_entities",
    "list_rules",
    "list_sessions",
    "parse_connection_string",
    "peek",
    "process",
    "purge",
    "receive",
    "receive_deferred",
    "redact",
    "resolve",
    "resubmit",
    "scan",
    "scan_records",
    "schedule",
    "send",
    "sequence_numbers",
    "set_session_state",
    "to_dataframe",
    "to_record",
    "update_entity",
]
