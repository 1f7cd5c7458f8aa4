"""The benchmarks: scripts run as ``python benchmarks/<name>.py`` (docs/benchmarks.md) that import their
parts as siblings (``from _common import start_emulator``, ``from soak.rounds import Rounds``), which
works because a script's folder comes first on ``sys.path``. Imported as this package instead
(``python -m benchmarks.<name>``, or ``from benchmarks.chaos_soak import run`` in the tests), the folder
is put on ``sys.path`` here, once."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)
