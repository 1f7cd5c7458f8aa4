"""The %sb_* magics: thin commands over the settlement library, one module per command family,
registered on one ``SbMagics`` class and sharing one parser and error handler.

Every command takes ``-h`` (and ``%sb_peek?`` shows the same help). A command that fails fails its
cell with one line (a ``UsageError``: Run All and jobs stop there); ``%config
SbMagics.full_tracebacks = True`` raises the original exception, with its traceback, instead.

Where to change what:

- a command: ``connect.py`` (%sb_connect), ``entities.py`` (%sb_entities), ``peek.py`` (%sb_peek,
  %sb_browse), ``receive.py`` (%sb_receive, %sb_settle), ``send.py`` (%%sb_send, %sb_compose),
  ``dlq.py`` (%sb_dlq), ``resubmit.py`` (%sb_resubmit), ``discard.py`` (%sb_discard), ``purge.py``
  (%sb_purge, %sb_cancel_scheduled), ``copying.py`` (%sb_copy; a glob's copy in ``copying_many.py``),
  ``files.py`` (%sb_export, %sb_import), ``sessions.py`` (%sb_sessions, %sb_session_state),
  ``stats.py`` (%sb_stats), ``tail.py`` (%sb_tail), ``topology.py`` (%sb_topology), ``route.py``
  (%sb_route), ``journeys.py`` (%sb_trace), ``playbook.py`` (%sb_playbook);
- what the commands share: ``command.py`` (the parser and the one error handler), ``targets.py``
  (the entity and sequence-number arguments), ``times.py`` (every time flag, read by
  ``core.parse_time``, and ``--where``), ``progress.py`` (the live progress line), ``brakes.py`` (the brake's and the
  canary's options),
  ``sdklogs.py`` (the SDK's log noise, summarised);
- the magics object: ``sbmagics.py`` (``SbMagics``: registers every family), ``settings.py`` (each
  setting once, with its default), ``state.py`` (what a family needs of it, typed without an
  import circle), ``completion.py`` (tab completion).
"""

from __future__ import annotations

from . import completion
from .command import PARSERS, CommandFailed, Declined, Parser
from .sbmagics import SbMagics
from .sdklogs import SdkLogSummary

__all__ = ["PARSERS", "CommandFailed", "Declined", "Parser", "SbMagics", "SdkLogSummary", "completion"]
