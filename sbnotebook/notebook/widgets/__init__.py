"""ipywidgets panels over the settlement library: browse, settle, triage, send."""

from .browser import MessageBrowser
from .send import SendPanel
from .settlement import SettlementPanel
from .triage import TriagePanel, merge_patch, patch_edit

__all__ = ["MessageBrowser", "SendPanel", "SettlementPanel", "TriagePanel", "merge_patch", "patch_edit"]
