"""ipywidgets panels over the settlement library: browse, settle, triage, send."""

from ..edits import merge_patch, patch_edit
from .browser import MessageBrowser
from .send import SendPanel
from .settlement import SettlementPanel
from .triage import TriagePanel

__all__ = ["MessageBrowser", "SendPanel", "SettlementPanel", "TriagePanel", "merge_patch", "patch_edit"]
