"""The notebook layer: IPython magics, ipywidgets panels and plotly charts, all built on sbnotebook.core."""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> Any:
    """``%load_ext sbnotebook``: register the %sb_* magics once per shell (loading again is harmless)."""
    from .magics import SbMagics, completion

    for existing in ipython.configurables:
        if isinstance(existing, SbMagics):
            return existing
    magics = SbMagics(ipython)  # Magics add themselves to shell.configurables: %config SbMagics works
    ipython.register_magics(magics)
    if getattr(ipython, "Completer", None) is not None:
        magics.completer = completion.install(ipython, magics)
    return magics


def unload_ipython_extension(ipython: Any) -> None:
    """Give back the locks of batches still open; take the completion out."""
    from .magics import SbMagics, completion

    completion.uninstall(ipython)
    for existing in list(ipython.configurables):
        if isinstance(existing, SbMagics):
            for batch in existing.batches:
                batch.close()
            existing.sdk_logs.uninstall()
            while existing in ipython.configurables:
                ipython.configurables.remove(existing)
