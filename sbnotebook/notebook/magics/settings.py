"""The magics' settings, each declared once here with its default, bounds and help (docs/magics.md
lists them). ``SbMagics`` inherits them through ``MagicsState`` (state.py), the type the command
families give ``self``: so a family reads a setting with the type its trait gives, and nothing
declares it a second time."""

from __future__ import annotations

from typing import Any

from traitlets import Bool, CaselessStrEnum, Float, Int, TraitError, observe, validate
from traitlets.config import Configurable

from ... import core
from ...core import deprecated
from ..widgets import grid as grid_mod

RENAMED_SETTINGS = {  # old -> new
    "peek_count": "peek_max_messages",
    "receive_count": "receive_max_messages",
    "max_renewal": "max_renewal_seconds",
}


class MagicsSettings(Configurable):
    """The settings of ``SbMagics``. A plain Configurable, not a Protocol, so that its traits are the
    declarations: traitlets reads a configurable's section under every class name of its MRO, so
    ``%config SbMagics.x``, ``c.SbMagics.x`` and ``class_trait_names(config=True)`` see them on
    ``SbMagics`` as if declared there."""

    # Each default is core's (core/defaults.py): the library and the magics start from the same.
    peek_max_messages = Int(
        core.PEEK_MAX_MESSAGES, min=1, help="At most this many messages %sb_peek shows by default."
    ).tag(config=True)
    receive_max_messages = Int(
        core.RECEIVE_MAX_MESSAGES, min=1, help="At most this many messages %sb_receive takes by default."
    ).tag(config=True)
    max_in_flight = Int(core.MAX_IN_FLIGHT, help="Send and settlement operations in flight at once.").tag(config=True)
    wait_seconds = Float(core.WAIT_SECONDS, min=0.0, help="How long %sb_receive waits for the first message.").tag(
        config=True
    )
    max_renewal_seconds = Float(
        core.MAX_RENEWAL_SECONDS, min=0.0, help="Seconds a received batch's locks are renewed for while open."
    ).tag(config=True)
    tail_interval = Float(
        core.TAIL_INTERVAL, min=0.01, help="Seconds between two polls of %sb_tail (each poll is one peek)."
    ).tag(config=True)
    full_tracebacks = Bool(False, help="Show full tracebacks instead of one-line errors.").tag(config=True)
    confirm = Bool(True, help="Ask before destructive actions (receive-and-delete, settling every row).").tag(
        config=True
    )
    websockets = Bool(
        False, help="Dial AMQP over WebSockets (port 443) where port 5671 is blocked, as %sb_connect --websockets."
    ).tag(config=True)

    # Old names kept for one release (docs/names.md): setting one sets its new name and says so once.
    # None by default, so that any value given (even the default's) is seen and passed on.
    peek_count = Int(None, allow_none=True, min=1, help="Deprecated: peek_max_messages.").tag(config=True)
    receive_count = Int(None, allow_none=True, min=1, help="Deprecated: receive_max_messages.").tag(config=True)
    max_renewal = Float(None, allow_none=True, min=0.0, help="Deprecated: max_renewal_seconds.").tag(config=True)

    # Annotated: traitlets types an enum's value as Any otherwise.
    grid: CaselessStrEnum[str] = CaselessStrEnum(
        grid_mod.GRID_MODES,
        default_value="auto",
        help="The panels' message lists: 'itables' grids, 'plain' lists, or 'auto' (plain on Databricks). "
        "Panels read it here when they draw a list (widgets/grid.py).",
    ).tag(config=True)

    @validate("max_in_flight")
    def _max_in_flight(self, proposal: Any) -> int:
        try:
            return core.check_max_in_flight(proposal["value"], "SbMagics.max_in_flight")  # the kit's one check
        except core.InvalidInputError as exc:
            raise TraitError(exc.message) from None

    @observe(*RENAMED_SETTINGS)
    def _renamed_setting(self, change: Any) -> None:
        if change["new"] is not None:
            new = RENAMED_SETTINGS[change["name"]]
            deprecated(f"SbMagics.{change['name']}", f"SbMagics.{new}")
            setattr(self, new, change["new"])
