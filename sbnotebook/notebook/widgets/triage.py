"""Dead-letter triage: group by reason, inspect, repair in bulk, resubmit (copy first), or discard."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ... import core
from ...core import EntityPath, InvalidInputError, Report
from ...core.live import ConnectionLike, live
from .. import plots
from .render import detail_html, guard, row_label

Edit = Callable[[dict[str, Any]], dict[str, Any] | None]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def patch_edit(patch: dict[str, Any]) -> Edit:
    """An edit applying a JSON merge patch to JSON bodies (others are left where they are)."""

    def edit(record: dict[str, Any]) -> dict[str, Any] | None:
        try:
            body = json.loads(record.get("body_text") or "")
        except ValueError:
            return None
        record["body_text"] = json.dumps(merge_patch(body, patch))
        return record

    return edit


class TriagePanel(W.VBox):
    """Everything destructive (resubmit moves, discard removes) waits for an explicit confirmation."""

    def __init__(self, entity: str, *, connection: ConnectionLike = None, limit: int = 1000) -> None:
        self.connection = live(connection)
        self.source = EntityPath.parse(entity).parent
        self.dlq = str(EntityPath(self.source.name, self.source.subscription, "dead_letter"))
        self.limit = limit
        self.records: list[dict[str, Any]] = []
        self.visible: list[dict[str, Any]] = []
        self.edit: Edit | None = None
        self.reports: list[Report] = []
        self.pending: tuple[str, Callable[[], Report]] | None = None
        self.chart = W.Output()
        self.groups = W.Select(options=[], description="Reason", rows=6)
        self.rows = W.SelectMultiple(options=[], rows=10, layout=W.Layout(width="100%"))
        self.detail = W.HTML()
        default_target = "" if self.source.is_subscription else str(self.source)
        self.target = W.Text(value=default_target, description="Target", placeholder="queue to resubmit to")
        self.patch = W.Textarea(placeholder='JSON merge patch for the bodies, e.g. {"currency": "EUR"}', rows=3)
        self.resubmit_button = W.Button(description="Resubmit selected…", button_style="warning")
        self.discard_button = W.Button(description="Discard selected…", button_style="danger")
        self.confirm_box = W.Text(description="Confirm", placeholder="type the word shown")
        self.confirm_button = W.Button(description="Confirm")
        self.cancel_button = W.Button(description="Cancel")
        self.status = W.HTML()
        self.report = W.HTML()
        self.groups.observe(lambda _: self._show_group(), names="value")
        self.rows.observe(self._on_select, names="value")
        self.resubmit_button.on_click(guard(self.status, self.ask_resubmit))
        self.discard_button.on_click(guard(self.status, self.ask_discard))
        self.confirm_button.on_click(guard(self.status, lambda: self.confirm(self.confirm_box.value)))
        self.cancel_button.on_click(guard(self.status, self.cancel))
        self.confirmation = W.HBox([self.confirm_box, self.confirm_button, self.cancel_button])
        self.confirmation.layout.display = "none"
        super().__init__(
            [
                self.status,
                self.chart,
                self.groups,
                self.rows,
                self.detail,
                W.HBox([self.target, self.resubmit_button, self.discard_button]),
                self.patch,
                self.confirmation,
                self.report,
            ]
        )
        self.reload()

    # ---------------------------------------------------------- loading

    def reload(self) -> None:
        self.records = core.peek(self.dlq, count=self.limit, connection=self.connection).records
        table = plots.reason_counts(self.records)
        options = [(f"{r.dead_letter_reason} ({r.messages})", r.dead_letter_reason) for r in table.itertuples()]
        self.groups.options = [(f"all ({len(self.records)})", None), *options]
        self.groups.value = None
        self.chart.clear_output()
        with self.chart:
            from IPython.display import display

            display(plots.dead_letter_reasons(self.records))
        self.status.value = f"<b>{self.dlq}</b>: {len(self.records)} dead-lettered messages, {len(options)} reasons"
        self._show_group()

    @property
    def reasons(self) -> dict[str, int]:
        return {str(r.dead_letter_reason): int(r.messages) for r in plots.reason_counts(self.records).itertuples()}

    def select_group(self, reason: str | None) -> None:
        self.groups.value = reason

    def _show_group(self) -> None:
        reason = self.groups.value
        self.visible = [
            r for r in self.records if reason is None or (r.get("dead_letter_reason") or "(none)") == reason
        ]
        self.rows.options = [(row_label(r), i) for i, r in enumerate(self.visible)]
        self.rows.value = ()

    def select(self, rows: list[int]) -> None:
        self.rows.value = tuple(rows)

    @property
    def selected(self) -> list[dict[str, Any]]:
        """The selected rows, or the whole group when none is selected."""
        return [self.visible[i] for i in self.rows.value] or list(self.visible)

    def _on_select(self, _: Any) -> None:
        chosen = list(self.rows.value)
        self.detail.value = detail_html(self.visible[chosen[-1]]) if chosen else ""

    # ---------------------------------------------------------- actions (two steps)

    def _editor(self) -> Edit | None:
        if self.edit is not None:
            return self.edit
        text = self.patch.value.strip()
        if not text:
            return None
        try:
            patch = json.loads(text)
        except ValueError as exc:
            raise InvalidInputError(f"The patch is not valid JSON: {exc}") from None
        if not isinstance(patch, dict):
            raise InvalidInputError("The patch must be a JSON object (a merge patch).")
        return patch_edit(patch)

    def ask_resubmit(self, target: str | None = None) -> str:
        """Prepare a resubmit of the selection; nothing moves until confirm('resubmit')."""
        chosen = {int(r["sequence_number"]) for r in self.selected}
        goal = (target or self.target.value).strip()
        if not goal:
            return self._say("Name a target queue: resubmitting to the topic would reach every subscription.")
        edit = self._editor()
        applied = self._describe_edit()

        def run() -> Report:
            return core.resubmit(
                self.dlq,
                target=goal,
                where=lambda r: int(r["sequence_number"]) in chosen,
                edit=edit,
                connection=self.connection,
            )

        return self._prepare("resubmit", f"Resubmit {len(chosen)} messages to {goal} {applied}", run)

    def _describe_edit(self) -> str:
        """What a resubmit will change, shown before the confirmation (html)."""
        if self.edit is not None:
            return "with the Python edit in <code>panel.edit</code> applied to each body"
        text = self.patch.value.strip()
        if not text:
            return "unchanged (no patch)"
        return f"with this merge patch applied to each JSON body: <code>{html.escape(text)}</code>"

    def ask_discard(self) -> str:
        chosen = {int(r["sequence_number"]) for r in self.selected}

        def run() -> Report:
            return core.discard(
                self.dlq, where=lambda r: int(r["sequence_number"]) in chosen, connection=self.connection
            )

        return self._prepare("discard", f"Remove {len(chosen)} messages from {self.dlq} for good", run)

    def _prepare(self, word: str, what: str, run: Callable[[], Report]) -> str:
        self.pending = (word, run)
        self.confirmation.layout.display = "flex"
        self.confirm_box.value = ""
        return self._say(f"{what}? Type <b>{word}</b> and press Confirm.")

    def cancel(self) -> None:
        self.pending = None
        self.confirmation.layout.display = "none"
        self._say("Cancelled: nothing was changed.")

    def confirm(self, typed: str) -> Report | None:
        if self.pending is None:
            self._say("Nothing to confirm.")
            return None
        word, run = self.pending
        if typed.strip().lower() != word:
            self._say(f"Type <b>{word}</b> exactly to go on, or Cancel.")
            return None
        self.pending = None
        self.confirmation.layout.display = "none"
        if word == "resubmit":  # a patch or edit is used once: the next resubmit starts clean
            self.edit = None
            self.patch.value = ""
        report = run()
        self.reports.append(report)
        self.report.value = self.final_report()
        self.reload()
        return report

    def final_report(self) -> str:
        """Every confirmed action's report: its summary line (what moved where) and any failures."""
        return "<b>What moved where</b>" + "".join(r._repr_html_() for r in self.reports)

    def _say(self, text: str) -> str:
        self.status.value = text
        return text
