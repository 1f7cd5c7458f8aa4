"""The %sb_* magics: thin commands over the settlement library, one module per command family
(connect, entities, peek/browse, receive/settle, send/compose, dlq, stats), registered on one
``SbMagics`` class (sbmagics.py) and sharing one parser and error handler (command.py).

Every command takes ``-h`` (and ``%sb_peek?`` shows the same help). Errors a user can fix print one
line; ``%config SbMagics.full_tracebacks = True`` shows the whole traceback instead.
"""

from __future__ import annotations

from . import completion
from .command import PARSERS, Declined, Parser
from .sbmagics import SbMagics
from .sdklogs import SdkLogSummary

__all__ = ["PARSERS", "Declined", "Parser", "SbMagics", "SdkLogSummary", "completion"]
