"""Entity panel: the namespace's queues, topics and subscriptions; create, update or delete them and
a subscription's rules. Deleting waits for the entity's name typed back, in a row next to the button.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W

from ... import core
from ...core import ConnectionLike, InvalidInputError, live_connection
from ..cells import json_object
from .confirm import ConfirmRow, Pending
from .render import guard


def _properties(text: str) -> dict[str, Any]:
    return json_object(text, "Properties (nothing was changed)", '{"max_delivery_count": 5}') or {}


class EntityPanel(W.VBox):
    """The namespace's queues, topics and subscriptions with their counts; create, update or delete
    them and a subscription's rules (a delete waits for the entity's name typed back)."""

    def __init__(self, *, connection: ConnectionLike = None) -> None:
        self.connection = live_connection(connection)
        self.status = W.HTML()
        self.list = W.Select(options=[], rows=10, layout=W.Layout(width="100%"))
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.detail = W.HTML(layout=W.Layout(max_width="100%", overflow="auto"))
        self.kind = W.Dropdown(options=["queue", "topic", "subscription"], value="queue", description="Kind")
        self.name = W.Text(description="Name", placeholder="orders, or topic/subscriptions/name")
        self.props = W.Textarea(
            placeholder='{"lock_duration": "1m", "max_delivery_count": 5}', rows=3, layout=W.Layout(width="100%")
        )
        self.create_button = W.Button(description="Create", button_style="primary")
        self.update_button = W.Button(description="Update selected", button_style="warning")
        self.delete_button = W.Button(description="Delete selected…", button_style="danger")
        self.confirm_row = ConfirmRow(
            placeholder="type the entity's name",
            width="16em",
            nothing_pending="Nothing to confirm: press Delete selected… first.",
        )
        self.rule_name = W.Text(description="Rule", placeholder="name")
        self.rule_sql = W.Text(description="SQL filter", placeholder="region = 'eu'")
        self.rule_action = W.Text(description="Action", placeholder="SET tier = 'gold' (optional)")
        self.add_rule_button = W.Button(description="Add rule")
        self.delete_rule_button = W.Button(description="Delete rule")
        self.rules_box = W.VBox(
            [
                W.HBox([self.rule_name, self.rule_sql, self.rule_action]),
                W.HBox([self.add_rule_button, self.delete_rule_button]),
            ]
        )
        self.rules_box.layout.display = "none"
        self.refresh_button.on_click(guard(self.status, self.refresh))
        self.create_button.on_click(guard(self.status, self.create))
        self.update_button.on_click(guard(self.status, self.update))
        self.delete_button.on_click(guard(self.status, self.ask_delete))
        self.confirm_row.confirm_button.on_click(
            guard(self.status, lambda: self.confirm_delete(self.confirm_row.box.value))
        )
        self.confirm_row.cancel_button.on_click(guard(self.status, self.cancel))
        self.add_rule_button.on_click(guard(self.status, self.add_rule))
        self.delete_rule_button.on_click(guard(self.status, self.delete_rule))
        self.list.observe(lambda _: guard(self.status, self.show)(), names="value")
        super().__init__(
            [
                W.HBox([W.HTML("<b>Entities</b>"), self.refresh_button]),
                self.status,
                self.list,
                self.detail,
                self.rules_box,
                W.HBox([self.kind, self.name]),
                self.props,
                W.HBox([self.create_button, self.update_button, self.delete_button]),
                self.confirm_row,
            ],
            layout=W.Layout(max_width="100%"),
        )
        guard(self.status, self.refresh)()

    @property
    def selected(self) -> str | None:
        return str(self.list.value) if self.list.value is not None else None

    def _need(self) -> str:
        if self.selected is None:
            raise InvalidInputError("Select an entity first.")
        return self.selected

    def refresh(self) -> None:
        """List the entities and their counts again."""
        self.cancel()
        rows = core.list_entities(connection=self.connection)
        keep = self.selected
        self.list.options = [
            (f"{r.entity} · {r.kind} · {r.active} active, {r.dead_letter} dead-lettered", r.entity) for r in rows
        ]
        names = [r.entity for r in rows]
        self.list.value = keep if keep in names else None
        self.show()

    def show(self) -> None:
        """The selected entity's properties, and for a subscription its rules."""
        entity = self.selected
        if entity is None:
            self.detail.value, self.rules_box.layout.display = "", "none"
            return
        props = core.entity_properties(entity, connection=self.connection)
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in props.items()
        )
        text = f"<table>{rows}</table>"
        if props["kind"] == "subscription":
            rules = core.list_rules(entity, connection=self.connection)
            text += (
                "<b>Rules</b><table>"
                + "".join(
                    f"<tr><th style='text-align:left'>{html.escape(r.name)}</th><td>{html.escape(r.filter_kind)}: "
                    f"{html.escape(r.filter)}</td><td>{html.escape(r.action or '')}</td></tr>"
                    for r in rules
                )
                + "</table>"
            )
        self.rules_box.layout.display = "flex" if props["kind"] == "subscription" else "none"
        self.detail.value = text

    def create(self) -> dict[str, Any]:
        """Create the entity of the form's kind and name, with the properties in the JSON box."""
        name = self.name.value.strip()
        if not name:
            raise InvalidInputError("Give the new entity a name.")
        made = core.create_entity(
            name, kind=self.kind.value, properties=_properties(self.props.value), connection=self.connection
        )
        self.refresh()
        self.list.value = name
        self.status.value = html.escape(f"Created {made['kind']} {name}.")
        return made

    def update(self) -> dict[str, Any]:
        """Change the selected entity's properties to those in the JSON box; says each before -> after."""
        entity = self._need()
        props = _properties(self.props.value)
        if not props:
            raise InvalidInputError('Put the properties to change in the box, e.g. {"max_delivery_count": 10}.')
        change = core.update_entity(entity, props, connection=self.connection)
        self.show()
        self.status.value = html.escape(
            "; ".join(f"{entity}: {k} {change['before'][k]} -> {v}" for k, v in change["after"].items())
        )
        return change

    def ask_delete(self) -> None:
        """Ask to delete the selected entity, saying what it holds; nothing is deleted before its name is typed back."""
        entity = self._need()
        kind = core.entity_properties(entity, connection=self.connection)["kind"]
        held = ""
        if kind != "topic":
            c = core.counts(entity, connection=self.connection)
            held = f" with {c.active} active and {c.dead_letter} dead-lettered messages"
        self.confirm_row.ask(
            html.escape(f"Delete {kind} {entity}{held}? Type its name:"),
            Pending(lambda: self._delete(entity), entity, exact=True, refused="nothing was deleted"),
        )

    def confirm_delete(self, typed: str) -> str:
        """Delete the entity asked about when ``typed`` is its name (else nothing is deleted); its kind."""
        kind: str = self.confirm_row.take(typed)()
        return kind

    def _delete(self, entity: str) -> str:
        kind = core.delete_entity(entity, connection=self.connection)
        self.refresh()
        self.status.value = html.escape(f"Deleted {kind} {entity}.")
        return kind

    def cancel(self) -> None:
        """Drop the question asked, if any: nothing changes."""
        self.confirm_row.cancel()

    def add_rule(self) -> core.RuleInfo:
        """Add the rule in the form (its name and SQL filter) to the selected subscription."""
        entity = self._need()
        if not self.rule_name.value.strip() or not self.rule_sql.value.strip():
            raise InvalidInputError("A rule needs a name and a SQL filter.")
        rule = core.create_rule(
            entity,
            self.rule_name.value.strip(),
            sql=self.rule_sql.value.strip(),
            action=self.rule_action.value.strip() or None,
            connection=self.connection,
        )
        self.show()
        self.status.value = html.escape(f"Added rule {rule.name} to {entity}.")
        return rule

    def delete_rule(self) -> None:
        """Delete the rule named in the form from the selected subscription."""
        entity, name = self._need(), self.rule_name.value.strip()
        if not name:
            raise InvalidInputError("Give the name of the rule to delete.")
        core.delete_rule(entity, name, connection=self.connection)
        self.show()
        self.status.value = html.escape(f"Deleted rule {name} of {entity}.")
