"""Send panel: compose one message, or send a DataFrame, with progress and the send report."""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as W

from ... import core
from ...core import InvalidInputError, SendReport
from ..cells import parse_when


class SendPanel(W.VBox):
    def __init__(self, entity: str, *, connection: Any = None, max_in_flight: int = 10) -> None:
        self.connection = core.resolve(connection)
        self.max_in_flight = max_in_flight
        self.entity_box = W.Text(value=entity, description="Entity")
        self.body = W.Textarea(placeholder='{"order": 1}', description="Body", rows=5, layout=W.Layout(width="100%"))
        self.content_type = W.Text(value="application/json", description="Content type")
        self.subject = W.Text(description="Subject")
        self.properties = W.Textarea(placeholder='{"priority": "high"}', description="Properties", rows=2)
        self.schedule = W.Text(description="Schedule", placeholder="+10m, 2h or an ISO time (empty: now)")
        self.send_button = W.Button(description="Send", button_style="primary")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="Sent")
        self.status = W.HTML()
        self.reports: list[SendReport] = []
        self.send_button.on_click(lambda _: self.send())
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
        props: dict[str, Any] = {}
        if self.properties.value.strip():
            try:
                props = json.loads(self.properties.value)
            except ValueError as exc:
                raise InvalidInputError(f"Properties are not valid JSON: {exc}") from None
            if not isinstance(props, dict):
                raise InvalidInputError("Properties must be a JSON object.")
        record: dict[str, Any] = {"body": self.body.value, "application_properties": props}
        for key, box in (("content_type", self.content_type), ("subject", self.subject)):
            if box.value.strip():
                record[key] = box.value.strip()
        return record

    def send(self, messages: Any = None) -> SendReport | None:
        """Send the composed message, or `messages` (a DataFrame, records, ...) when given."""
        try:
            items = [self.compose()] if messages is None else messages
            when = parse_when(self.schedule.value) if self.schedule.value.strip() else None
        except InvalidInputError as exc:
            self.status.value = f"<span style='color:#b00'>{exc}</span>"
            return None
        total = len(items) if hasattr(items, "__len__") else 0
        self.progress.max, self.progress.value = max(total, 1), 0

        def progress(report: SendReport) -> None:
            self.progress.value = report.sent + report.failed

        report = core.send(
            self.entity_box.value,
            items,
            max_in_flight=self.max_in_flight,
            progress=progress,
            schedule_at=when,
            connection=self.connection,
        )
        self.reports.append(report)
        self.progress.max, self.progress.value = max(report.total, 1), report.sent + report.failed
        verdict = "all sent" if report.ok else f"<b style='color:#b00'>{report.failed} failed</b>"
        failures = "".join(
            f"<li>{f.condition}: {f.error} (tracking id {f.tracking_id})</li>" for f in report.failures[:20]
        )
        self.status.value = (
            f"{report.sent} of {report.total} sent to {report.entity} ({verdict}), {report.rate:.0f} msg/s"
            + (f"<ul>{failures}</ul>" if failures else "")
        )
        return report

    def send_dataframe(self, frame: Any) -> SendReport | None:
        return self.send(frame)
