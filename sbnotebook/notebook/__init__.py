"""The notebook layer: IPython magics, ipywidgets panels and plotly charts, all built on sbnotebook.core.

Where to change what:

- ``magics/``: the %sb_* commands (one module per command family); ``widgets/``: the panels;
- ``plots.py``: the charts, plain functions returning plotly figures;
- what the magics and panels share, none of it importing IPython or ipywidgets: ``addresses.py``
  (``NAME:ENTITY``, which connection an entity belongs to), ``cells.py`` (reading what analysts
  type: cell bodies, row selections, times), ``edits.py`` (a resubmit's merge patch and property
  edits, with their diff), ``purging.py`` (what a purge or a cancel will remove, counted first),
  ``export.py`` (the JSON lines format, from core), ``config.py`` (``[tool.sbnotebook]`` in
  pyproject.toml);
- here: ``%load_ext sbnotebook`` (registers the magics and their completion once per shell).
"""

from __future__ import annotations

from typing import Any

# The import names of the `notebook` extra's packages the magics and panels import (pyproject.toml).
NOTEBOOK_EXTRA = ("ipywidgets", "plotly", "IPython", "traitlets")


def load_ipython_extension(ipython: Any) -> Any:
    """``%load_ext sbnotebook``: register the %sb_* magics once per shell (loading again is harmless)."""
    try:
        from .magics import SbMagics, completion
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if missing is None or missing.split(".")[0] not in NOTEBOOK_EXTRA:
            raise
        raise _missing_extra(missing.split(".")[0]) from None

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


def _missing_extra(name: str) -> Exception:
    """One line for a kernel without the `notebook` extra (the traceback of a failed import says
    neither what to install nor how), as IPython's UsageError: shown without a traceback."""
    from IPython.core.error import UsageError

    from ..about import install

    return UsageError(
        f"sbnotebook's magics and panels need the notebook extra ({name} is not installed): run "
        f"%{install().pip_install('notebook')} in a cell, then restart the kernel."
    )
