"""The triage panel's actions, in two steps: resubmit the selected rows (copy first, with an optional
merge patch or Python edit) or discard them, each waiting for its word typed back in the confirm
row (``widgets/confirm.py``, as in every panel); each confirmed action's Report is kept and shown."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ... import core
from ...core import InvalidInputError, LiveConnection, Report
from ..edits import Edit, describe_patch, patch_from_text
from .confirm import ConfirmRow, Pending
from .render import guard

_TAGS = re.compile(r"<[^>]+>")


class TriageActions:
    """Mixed into ``TriagePanel``, which makes these widgets and gives the rows acted on."""

    dlq: str
    connection: LiveConnection
    edit: Edit | None  # a Python edit for resubmit, used once (else the patch box's merge patch)
    patch: W.Textarea
    target: W.Text
    resubmit_button: W.Button
    discard_button: W.Button
    confirm_row: ConfirmRow
    reports: list[Report]
    report: W.HTML
    status: W.HTML

    @property
    def selected(self) -> list[dict[str, Any]]:
        raise NotImplementedError  # the panel's selection

    def _of(self) -> str:
        raise NotImplementedError  # the panel says what part of the group the rows are

    def reload(self) -> None:
        raise NotImplementedError

    def _action_widgets(self, default_target: str) -> list[W.Widget]:
        """The repair box, the two actions, the prompt line (``status``, which the panel made), the
        confirm row right under it, and the report of what moved where; wired to the actions."""
        wide = W.Layout(width="100%", max_width="100%")
        self.edit = None
        self.reports = []
        self.target = W.Text(
            value=default_target,
            description="Resubmit to",
            placeholder="queue to resubmit to",
            style={"description_width": "initial"},  # its full label, never cut
            layout=W.Layout(width="auto", min_width="320px"),
        )
        self.patch = W.Textarea(
            placeholder='JSON merge patch for the bodies, e.g. {"currency": "EUR"}', rows=3, layout=wide
        )
        resubmit = W.Button(description="Resubmit selected…", button_style="warning", layout=W.Layout(width="auto"))
        discard = W.Button(description="Discard selected…", button_style="danger", layout=W.Layout(width="auto"))
        self.resubmit_button, self.discard_button = resubmit, discard
        self.confirm_row = ConfirmRow(button_style="primary", nothing_pending="Nothing to confirm.")
        self.confirm_row.layout.flex_flow = "row wrap"
        self.report = W.HTML(layout=wide)
        resubmit.on_click(guard(self.status, self.ask_resubmit))
        discard.on_click(guard(self.status, self.ask_discard))
        self.confirm_row.confirm_button.on_click(guard(self.status, lambda: self.confirm(self.confirm_row.box.value)))
        self.confirm_row.cancel_button.on_click(guard(self.status, self.cancel))
        row = W.Layout(flex_flow="row wrap", align_items="center", width="100%")
        return [
            W.HTML("<b>Repair</b> (optional): a JSON merge patch applied to each body on resubmit"),
            self.patch,
            W.HBox([self.target, resubmit, discard], layout=row),
            self.status,
            self.confirm_row,
            self.report,
        ]

    def _editor(self) -> Edit | None:
        return self.edit if self.edit is not None else patch_from_text(self.patch.value)

    def ask_resubmit(self, target: str | None = None) -> str:
        """Prepare a resubmit of the selection; nothing moves until confirm('resubmit')."""
        chosen = {int(r["sequence_number"]) for r in self.selected}
        goal = (target or self.target.value).strip()
        if not goal:
            return self._say("Name a target queue: resubmitting to the topic would reach every subscription.")
        edit = self._editor()
        applied = describe_patch(self.edit is not None, self.patch.value)

        def run() -> Report:
            return core.resubmit(
                self.dlq,
                target=goal,
                where=lambda r: int(r["sequence_number"]) in chosen,
                edit=edit,
                connection=self.connection,
            )

        return self._prepare("resubmit", f"Resubmit {len(chosen)} messages{self._of()} to {goal} {applied}", run)

    def ask_discard(self) -> str:
        chosen = {int(r["sequence_number"]) for r in self.selected}

        def run() -> Report:
            return core.discard(
                self.dlq, where=lambda r: int(r["sequence_number"]) in chosen, connection=self.connection
            )

        return self._prepare("discard", f"Remove {len(chosen)} messages{self._of()} from {self.dlq} for good", run)

    @property
    def pending(self) -> Pending | None:
        return self.confirm_row.pending

    def _prepare(self, word: str, what: str, run: Callable[[], Report]) -> str:
        self.confirm_row.ask("", Pending(run, word))
        return self._say(f"{what}? Type <b>{word}</b> and press Confirm.", prompt=True)

    def cancel(self) -> None:
        self.confirm_row.cancel()
        self._say("Cancelled: nothing was changed.")

    def confirm(self, typed: str) -> Report | None:
        """Run what was asked when ``typed`` is its word; else say what to do (None, nothing run)."""
        word = self.pending.word if self.pending is not None else None
        try:
            run = self.confirm_row.take(typed)
        except InvalidInputError as exc:
            self._say(html.escape(str(exc)))
            return None
        if word == "resubmit":  # a patch or edit is used once: the next resubmit starts clean
            self.edit = None
            self.patch.value = ""
        report: Report = run()
        self.reports.append(report)
        self.report.value = self.final_report()
        self.reload()
        self._say(f"Done: {html.escape(report.summary())}")  # the prompt is answered: it goes
        return report

    def final_report(self) -> str:
        """Every confirmed action's report: its summary line (what moved where) and any failures."""
        return "<b>What moved where</b>" + "".join(r._repr_html_() for r in self.reports)

    def _say(self, text: str, *, prompt: bool = False) -> str:
        """Show ``text`` (html) under the action buttons; return it as plain text (for a notebook cell)."""
        style = "background:#fff3cd;padding:4px 8px;border-radius:4px" if prompt else ""
        self.status.value = f"<div style='{style}'>{text}</div>" if style else text
        return html.unescape(_TAGS.sub("", text))
