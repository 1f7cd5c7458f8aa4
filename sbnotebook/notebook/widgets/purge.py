"""Purge panel: purge chosen kinds of messages, or cancel scheduled ones, after a counted confirmation.

Nothing is removed until the count was shown next to the button and the word typed back.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, InvalidInputError, Report, live_connection
from ..purging import KINDS, plan_purge, scheduled_to_cancel
from .confirm import ConfirmRow, Pending
from .render import guard


class PurgePanel(W.VBox):
    """Purge the chosen kinds of ``entity``'s messages (active, deferred, scheduled, its dead-letter
    queue), or cancel scheduled ones, each after the count is shown and the word typed back."""

    def __init__(self, entity: str, *, connection: ConnectionLike = None) -> None:
        self.connection = live_connection(connection)
        self.entity = entity
        self.reports: list[Report] = []
        labels = {"active": "Active", "deferred": "Deferred", "scheduled": "Scheduled", "dlq": "Dead-letter queue"}
        self.kinds = {k: W.Checkbox(value=k == "active", description=labels[k], indent=False) for k in KINDS}
        self.purge_button = W.Button(description="Purge…", button_style="danger")
        self.which = W.Text(description="Scheduled", placeholder="all, or 41,42,50-60")
        self.cancel_scheduled_button = W.Button(description="Cancel scheduled…", button_style="warning")
        self.confirm_row = ConfirmRow(nothing_pending="Nothing to confirm: press Purge… or Cancel scheduled… first.")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="Removed")
        self.status = W.HTML()
        self.purge_button.on_click(guard(self.status, self.ask_purge))
        self.cancel_scheduled_button.on_click(guard(self.status, self.ask_cancel_scheduled))
        self.confirm_row.confirm_button.on_click(guard(self.status, lambda: self.confirm(self.confirm_row.box.value)))
        self.confirm_row.cancel_button.on_click(guard(self.status, self.cancel))
        super().__init__(
            [
                W.HTML(f"<b>Purge {html.escape(entity)}</b>"),
                W.HBox([*self.kinds.values(), self.purge_button]),
                W.HBox([self.which, self.cancel_scheduled_button]),
                self.confirm_row,
                self.progress,
                self.status,
            ],
            layout=W.Layout(max_width="100%"),
        )

    @property
    def pending(self) -> Pending | None:
        return self.confirm_row.pending

    def _ask(self, text: str, word: str, action: Callable[[], list[Report]]) -> None:
        pending = Pending(action, word, refused="nothing was removed")
        self.confirm_row.ask(f"{html.escape(text)} Type <b>{word}</b>:", pending)

    def ask_purge(self) -> None:
        """Count what the ticked kinds hold and ask; an empty entity says so and asks nothing."""
        kinds = tuple(k for k, box in self.kinds.items() if box.value)
        if not kinds:
            raise InvalidInputError("Tick what to purge: active, deferred, scheduled or the dead-letter queue.")
        plan = plan_purge(self.entity, kinds, connection=self.connection)
        if plan.total == 0:
            self.cancel()
            self.status.value = html.escape(f"Nothing to purge: {plan.describe()}")
            return
        self.progress.max, self.progress.value = plan.total, 0
        self._ask(plan.describe(), "purge", lambda: plan.run(self._progress, connection=self.connection))

    def ask_cancel_scheduled(self) -> None:
        """Ask to cancel the scheduled messages the box names (``all`` or sequence numbers); nothing is
        cancelled before ``cancel`` is typed back."""
        numbers = scheduled_to_cancel(self.entity, self.which.value or "", connection=self.connection)
        if not numbers:
            self.cancel()
            self.status.value = html.escape(f"No scheduled messages in {self.entity}.")
            return
        self.progress.max, self.progress.value = len(numbers), 0
        self._ask(
            f"Cancel {len(numbers)} scheduled message(s) of {self.entity}.",
            "cancel",
            lambda: [core.cancel_scheduled(self.entity, numbers, progress=self._progress, connection=self.connection)],
        )

    def _progress(self, report: Report) -> None:
        self.progress.value = min(report.total, self.progress.max)

    def confirm(self, typed: str) -> list[Report]:
        """Do what was asked when ``typed`` is the word asked for (else nothing happens); the Reports."""
        reports: list[Report] = self.confirm_row.take(typed)()
        self.reports.extend(reports)
        self.progress.value = self.progress.max
        self.status.value = "".join(r._repr_html_() for r in reports)
        return reports

    def cancel(self) -> None:
        """Drop the question asked, if any: nothing changes."""
        self.confirm_row.cancel()
