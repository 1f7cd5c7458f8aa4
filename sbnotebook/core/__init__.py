"""The settlement library: connections, entity addresses, sends, peeks and records.

Everything above it (magics, widgets, the Spark data source) goes through this package.
It imports nothing from IPython, ipywidgets, plotly or Spark.
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
    redact,
)
from .peek import PeekPage, peek
from .process import DeadLetter, Done, Policy, ProcessReport, Retry, Skip, Stop, process
from .purge import PurgeReport, apurge, purge
from .receive import LockedBatch, SettleOutcome, receive, receive_deferred
from .records import RECORD_FIELDS, to_dataframe, to_record
from .resubmit import ResubmitReport, aresubmit, copy_message, discard, resubmit
from .search import compile_where, filter_records, json_columns
from .send import (
    RetryPolicy,
    SendFailure,
    SendReport,
    acancel_scheduled,
    aschedule,
    asend,
    cancel_scheduled,
    schedule,
    send,
)

__all__ = [
    "RECORD_FIELDS",
    "ConfigurationError",
    "Connection",
    "DeadLetter",
    "Done",
    "EntityCounts",
    "EntityNameError",
    "EntityNotFoundError",
    "EntityPath",
    "InvalidInputError",
    "LockLostError",
    "LockedBatch",
    "MessageTooLargeError",
    "PeekPage",
    "Policy",
    "ProcessReport",
    "PurgeReport",
    "ResubmitReport",
    "Retry",
    "RetryPolicy",
    "SbError",
    "SendFailure",
    "SendReport",
    "ServiceError",
    "SettleOutcome",
    "Skip",
    "Stop",
    "acancel_scheduled",
    "apurge",
    "aresubmit",
    "aschedule",
    "asend",
    "cancel_scheduled",
    "compile_where",
    "copy_message",
    "counts",
    "deferral",
    "discard",
    "filter_records",
    "json_columns",
    "list_entities",
    "parse_connection_string",
    "peek",
    "process",
    "purge",
    "receive",
    "receive_deferred",
    "redact",
    "resolve",
    "resubmit",
    "schedule",
    "send",
    "to_dataframe",
    "to_record",
]
