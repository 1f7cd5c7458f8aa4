"""Send panel: compose one message, or send a DataFrame, with progress and the send report."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, InvalidInputError, LiveConnection, Report, live_connection
from ..addresses import lookup, resolve
from ..cells import json_object
from .render import guard


class SendPanel(W.VBox):
    """Compose one message for ``entity`` (body, content type, subject, application properties,
    schedule time), or ``send_dataframe(df)``; each send goes through ``core.send`` with at most
    ``max_in_flight`` in flight, and the panel shows its progress and ``Report``. ``connections``:
    the named connections an entity typed as ``NAME:ENTITY`` is looked up in."""

    def __init__(
        self,
        entity: str,
        *,
        connection: ConnectionLike = None,
        connections: Mapping[str, LiveConnection] | None = None,
        max_in_flight: int = core.MAX_IN_FLIGHT,
    ) -> None:
        self.max_in_flight = core.check_max_in_flight(max_in_flight)  # refused here, not at the first send
        self.connection = live_connection(connection)
        self.named = lookup(connections or {})  # NAME:ENTITY typed into the entity box
        self.entity_box = W.Text(value=entity, description="Entity")
        self.body = W.Textarea(placeholder='{"order": 1}', description="Body", rows=5, layout=W.Layout(width="100%"))
        self.content_type = W.Text(value="application/json", description="Content type")
        self.subject = W.Text(description="Subject")
        self.properties = W.Textarea(placeholder='{"priority": "high"}', description="Properties", rows=2)
        # A time to come, in core's grammar (docs/names.md, Times): +10m or ISO 8601; empty: now.
        self.schedule = W.Text(description="Schedule", placeholder="+10m or ISO 8601 (empty: now)")
        self.schedule.tooltip = core.FUTURE_TIME_FORMS
        self.send_button = W.Button(description="Send", button_style="primary")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="Sent")
        self.status = W.HTML()
        self.reports: list[Report] = []
        self.send_button.on_click(guard(self.status, self.send))  # a refused key: said in the panel
        super().__init__(
            [
                self.entity_box,
                self.body,
                W.HBox([self.content_type, self.subject]),
                self.properties,
                W.HBox([self.schedule, self.send_button]),
                self.progress,
                self.status,
            ]
        )

    def compose(self) -> dict[str, Any]:
        """The message the form describes, as a record (checked before anything is sent)."""
        if not self.body.value.strip():
            raise InvalidInputError("The body is empty.")
        props = json_object(self.properties.value, "Properties", '{"priority": "high"}') or {}
        content_type = self.content_type.value.strip().lower().split(";")[0].strip()
        if content_type == "application/json" or content_type.endswith("+json"):
            try:
                json.loads(self.body.value)
            except ValueError as exc:
                raise InvalidInputError(
                    f"The body is not valid JSON ({exc}) but the content type is {content_type}: "
                    "fix the body or change the content type; nothing was sent."
                ) from None
        record: dict[str, Any] = {"body": self.body.value, "application_properties": props}
        for key, box in (("content_type", self.content_type), ("subject", self.subject)):
            if box.value.strip():
                record[key] = box.value.strip()
        return record

    def send(self, messages: Any = None) -> Report | None:
        """Send the composed message, or `messages` (a DataFrame, records, ...) when given."""
        try:
            items = [self.compose()] if messages is None else messages
            text = self.schedule.value.strip()
            when = core.parse_time(text, future=True, name="Schedule") if text else None
        except InvalidInputError as exc:
            self.status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return None
        total = len(items) if hasattr(items, "__len__") else 0
        self.progress.max, self.progress.value = max(total, 1), 0

        def progress(report: Report) -> None:
            self.progress.value = report.total

        entity, conn = resolve(self.entity_box.value, lambda: self.connection, self.named)
        report = core.send(
            entity,
            items,
            max_in_flight=self.max_in_flight,
            progress=progress,
            schedule_at=when,
            connection=conn,
        )
        self.reports.append(report)
        self.progress.max, self.progress.value = max(report.total, 1), report.total
        # The report's own view: its summary line, then each failure with condition and tracking id.
        self.status.value = report._repr_html_() + f"<p>{report.rate:.0f} msg/s</p>"
        return report

    def send_dataframe(self, frame: Any) -> Report | None:
        """Send ``frame``'s rows (a DataFrame) as messages: ``send(frame)``."""
        return self.send(frame)
