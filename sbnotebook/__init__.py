"""sbnotebook: Azure Service Bus in notebooks, with an embedded emulator.

``%load_ext sbnotebook`` registers the %sb_* magics (needs the ``notebook`` extra).

Where things are (each sub-package opens with its own map):

- ``core/``: the settlement library every layer above goes through (the only place that imports
  ``azure.*``, in ``core/sdk/``); ``emulator/``: the embedded broker (imports nothing of the rest
  but ``sqlrules/``); ``sqlrules/``: the SQL filter and action language of subscription rules, below
  both (imports nothing of the kit);
- ``notebook/``: the %sb_* magics, the panels and the charts; ``spark/``: the ``servicebus`` data
  source; ``testing/``: what the pytest plugin does once a test asks for a namespace;
- here: ``pytest_plugin.py`` (the plugin ``servicebus``: its options, marker and fixtures),
  ``cli.py`` (the ``sbnotebook`` command), ``topology_cli.py`` (``sbnotebook topology export``),
  ``playbook_cli.py`` (``sbnotebook playbook plan|run``),
  ``demo.py`` (``sbnotebook demo``), ``about.py`` (what this install is: versions, where it runs
  from, which install command fits), ``_version.py`` (the version, written once).
"""

from typing import Any

from ._version import __version__ as __version__


def load_ipython_extension(ipython: Any) -> Any:
    from .notebook import load_ipython_extension as load

    return load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook import unload_ipython_extension as unload

    unload(ipython)
