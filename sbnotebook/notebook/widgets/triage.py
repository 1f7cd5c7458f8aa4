"""Dead-letter triage: group by reason, inspect, repair in bulk, resubmit (copy first), or discard."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, EntityPath, InvalidInputError, Report, live_connection
from .. import plots
from ..edits import merge_patch
from .grid import BASE_COLUMNS, BODY_COLUMN, DEAD_LETTER_COLUMNS, MessageGrid
from .render import detail_html, guard

_TAGS = re.compile(r"<[^>]+>")
_ALL = "\x00all"  # the Reason dropdown's "all" entry (a None value would show an empty dropdown)
Edit = Callable[[dict[str, Any]], dict[str, Any] | None]


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
        self.connection = live_connection(connection)
        self.source = EntityPath.parse(entity).parent
        self.dlq = str(EntityPath(self.source.name, self.source.subscription, "dead_letter"))
        self.limit = limit
        self.records: list[dict[str, Any]] = []
        self.visible: list[dict[str, Any]] = []
        self.edit: Edit | None = None
        self.reports: list[Report] = []
        self.pending: tuple[str, Callable[[], Report]] | None = None
        wide = W.Layout(width="100%", max_width="100%")
        label = {"description_width": "initial"}  # labels at their full width, never cut
        self.title = W.HTML()
        self.reload_button = W.Button(description="Reload", icon="refresh", tooltip="peek the dead-letter queue again")
        self.chart = W.Output(layout=wide)
        self.groups = W.Dropdown(options=[], description="Reason", style=label, layout=W.Layout(width="auto"))
        self.rows = MessageGrid(columns=[*BASE_COLUMNS, *DEAD_LETTER_COLUMNS, BODY_COLUMN], rows=10)
        self.detail = W.HTML(layout=wide)
        default_target = "" if self.source.is_subscription else str(self.source)
        self.target = W.Text(
            value=default_target,
            description="Resubmit to",
            placeholder="queue to resubmit to",
            style=label,
            layout=W.Layout(width="auto", min_width="320px"),
        )
        self.patch = W.Textarea(
            placeholder='JSON merge patch for the bodies, e.g. {"currency": "EUR"}', rows=3, layout=wide
        )
        self.resubmit_button = W.Button(
            description="Resubmit selected…", button_style="warning", layout=W.Layout(width="auto")
        )
        self.discard_button = W.Button(
            description="Discard selected…", button_style="danger", layout=W.Layout(width="auto")
        )
        self.confirm_box = W.Text(description="Confirm", placeholder="type the word shown", style=label)
        self.confirm_button = W.Button(description="Confirm", button_style="primary")
        self.cancel_button = W.Button(description="Cancel")
        self.status = W.HTML(layout=wide)  # right under the action buttons: prompts, outcomes, mistakes
        self.report = W.HTML(layout=wide)
        self.reload_button.on_click(guard(self.status, self.reload))
        self.groups.observe(lambda _: self._show_group(), names="value")
        self.rows.on_select(self._on_select)
        self.resubmit_button.on_click(guard(self.status, self.ask_resubmit))
        self.discard_button.on_click(guard(self.status, self.ask_discard))
        self.confirm_button.on_click(guard(self.status, lambda: self.confirm(self.confirm_box.value)))
        self.cancel_button.on_click(guard(self.status, self.cancel))
        self.confirmation = W.HBox(
            [self.confirm_box, self.confirm_button, self.cancel_button], layout=W.Layout(flex_flow="row wrap")
        )
        self.confirmation.layout.display = "none"
        actions = W.HBox(
            [self.target, self.resubmit_button, self.discard_button],
            layout=W.Layout(flex_flow="row wrap", align_items="center", width="100%"),
        )
        super().__init__(
            [
                W.HBox([self.title, self.reload_button], layout=W.Layout(align_items="center", flex_flow="row wrap")),
                self.chart,
                self.groups,
                self.rows.widget,
                W.HTML(self.rows.note),
                self.detail,
                W.HTML("<b>Repair</b> (optional): a JSON merge patch applied to each body on resubmit"),
                self.patch,
                actions,
                self.status,
                self.confirmation,
                self.report,
            ],
            layout=W.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.reload()

    # ---------------------------------------------------------- loading

    def reload(self) -> None:
        self.pending = None  # what was asked was about the rows as they were
        self.confirmation.layout.display = "none"
        self.records = core.peek(self.dlq, count=self.limit, connection=self.connection).records
        table = plots.reason_counts(self.records)
        options = [(f"{r.dead_letter_reason} ({r.messages})", r.dead_letter_reason) for r in table.itertuples()]
        self.groups.options = [(f"all ({len(self.records)})", _ALL), *options]
        self.groups.value = _ALL
        self.chart.clear_output()
        with self.chart:
            from IPython.display import HTML, display

            if self.records:
                display(plots.dead_letter_reasons(self.records))
            else:  # an empty chart would show made-up axes
                display(HTML(f"<i>No dead-lettered messages in {html.escape(self.dlq)}.</i>"))
        self.title.value = (
            f"<b>{html.escape(self.dlq)}</b>: {len(self.records)} dead-lettered messages, {len(options)} reasons"
        )
        self._show_group()

    @property
    def reasons(self) -> dict[str, int]:
        return {str(r.dead_letter_reason): int(r.messages) for r in plots.reason_counts(self.records).itertuples()}

    def select_group(self, reason: str | None) -> None:
        """Show one dead-letter reason's messages (None: all of them)."""
        self.groups.value = _ALL if reason is None else reason

    def _show_group(self) -> None:
        reason = None if self.groups.value == _ALL else self.groups.value
        self.visible = [
            r for r in self.records if reason is None or (r.get("dead_letter_reason") or "(none)") == reason
        ]
        self.rows.show(self.visible)

    def select(self, rows: list[int]) -> None:
        self.rows.value = tuple(rows)

    @property
    def selected(self) -> list[dict[str, Any]]:
        """The selected rows, or the whole group when none is selected."""
        return [self.visible[i] for i in self.rows.value] or list(self.visible)

    def _on_select(self) -> None:
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
        return self._say(f"{what}? Type <b>{word}</b> and press Confirm.", prompt=True)

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
