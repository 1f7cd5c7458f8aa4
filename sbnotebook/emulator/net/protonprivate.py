"""The one list of python-qpid-proton's private API the emulator uses, and the modules that use it.

The broker drives proton's engine from its own loop and, on the hot paths (a delivery's tag and
lock token, sending a stored message, draining a connection's events), calls proton's C binding
directly instead of its wrappers (docs/emulator.md, Performance). proton does not promise these
names: ``tests/emulator/net/test_proton_boundary.py`` checks that each still exists in the installed proton and
that no other module touches them, as ``core.sdk.PRIVATE_NAMES`` does for the Service Bus SDK."""

from __future__ import annotations

# (owner, name): ``owner`` a module, or a module's attribute (``cproton_ffi.lib``, ``proton.Link``).
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    # cproton: the SWIG-style functions over the C engine
    ("cproton", "isnull"),
    ("cproton", "pn_collector_peek"),
    ("cproton", "pn_collector_pop"),
    ("cproton", "pn_delivery"),
    ("cproton", "pn_event_connection"),
    ("cproton", "pn_event_delivery"),
    ("cproton", "pn_event_type"),
    ("cproton", "pn_link_send"),
    # cproton_ffi: the C library itself (cffi)
    ("cproton_ffi", "ffi"),
    ("cproton_ffi.lib", "pn_delivery_link"),
    ("cproton_ffi.lib", "pn_delivery_remote_state"),
    ("cproton_ffi.lib", "pn_delivery_settle"),
    ("cproton_ffi.lib", "pn_delivery_settled"),
    ("cproton_ffi.lib", "pn_delivery_tag"),
    ("cproton_ffi.lib", "pn_delivery_update"),
    ("cproton_ffi.lib", "pn_delivery_updated"),
    ("cproton_ffi.lib", "pn_link_advance"),
    ("cproton_ffi.lib", "pn_link_is_sender"),
    # the wrappers' C handles, and wrapping a handle without the event machinery
    ("proton.Collector", "_impl"),
    ("proton.Connection", "_impl"),
    ("proton.Delivery", "_impl"),
    ("proton.Link", "_impl"),
    ("proton.Delivery", "wrap"),
    ("proton.Event", "wrap"),
)

# The modules that may touch them (tests/project/test_structure.py's BOUNDARIES lists the same).
MODULES = (
    "sbnotebook.emulator.amqp.handler",
    "sbnotebook.emulator.amqp.deliver",
    "sbnotebook.emulator.amqp.terms",
    "sbnotebook.emulator.net.loop",
)
