"""sbnotebook: Azure Service Bus in notebooks, with an embedded emulator.

``%load_ext sbnotebook`` registers the %sb_* magics (needs the ``notebook`` extra).
"""

from typing import Any

from ._version import __version__ as __version__


def load_ipython_extension(ipython: Any) -> Any:
    from .notebook import load_ipython_extension as load

    return load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook import unload_ipython_extension as unload

    unload(ipython)
