"""ipywidgets panels over the settlement library: browse, settle, triage, send, and the entities,
sessions, purge and live-tail panels. docs/widgets.md shows each with the magic that opens it.

Where to change what:

- one panel each: ``browser.py`` (``MessageBrowser``), ``settlement.py`` (``SettlementPanel``, a
  locked batch), ``triage.py`` (``TriagePanel``; its resubmit and discard in ``triage_actions.py``),
  ``send.py`` (``SendPanel``), ``entities.py`` (``EntityPanel``), ``sessions.py``
  (``SessionsPanel``), ``purge.py`` (``PurgePanel``), ``tail.py`` (``TailPanel``);
- what the panels share: ``grid.py`` (the message list: itables' grid, or a plain list),
  ``confirm.py`` (the confirmation row every destructive action waits on), ``render.py`` (how a
  message and its body look), ``background.py`` (long work on a thread of its own, with Stop).
"""

from ..edits import merge_patch, patch_edit
from .browser import MessageBrowser
from .entities import EntityPanel
from .purge import PurgePanel
from .send import SendPanel
from .sessions import SessionsPanel
from .settlement import SettlementPanel
from .tail import TailPanel
from .triage import TriagePanel

__all__ = [
    "EntityPanel",
    "MessageBrowser",
    "PurgePanel",
    "SendPanel",
    "SessionsPanel",
    "SettlementPanel",
    "TailPanel",
    "TriagePanel",
    "merge_patch",
    "patch_edit",
]
