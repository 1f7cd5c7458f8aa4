"""The %sb_* magics: thin commands over the settlement library, one module per command family
(connect, entities, peek/browse, receive/settle, send/compose, dlq, stats), registered on one
``SbMagics`` class (sbmagics.py; its settings in settings.py) and sharing one parser and error
handler (command.py).

Every command takes ``-h`` (and ``%sb_peek?`` shows the same help). A command that fails fails its
cell with one line (a ``UsageError``: Run All and jobs stop there); ``%config
SbMagics.full_tracebacks = True`` raises the original exception, with its traceback, instead.
"""

from __future__ import annotations

from . import completion
from .command import PARSERS, CommandFailed, Declined, Parser
from .sbmagics import SbMagics
from .sdklogs import SdkLogSummary

__all__ = ["PARSERS", "CommandFailed", "Declined", "Parser", "SbMagics", "SdkLogSummary", "completion"]
