"""Settings from ``[tool.sbnotebook]`` in the nearest pyproject.toml (the notebook's folder or above)."""

from __future__ import annotations

import difflib
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def find_pyproject(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def project_settings(known: Iterable[str], start: Path | None = None, *, old: Iterable[str] = ()) -> dict[str, Any]:
    """The [tool.sbnotebook] table, keys with '-' or '_'; an unknown key fails (UsageError: one line
    naming it and the closest known setting). ``old``: names still taken (kept for one release) but
    never suggested."""
    path = find_pyproject(start)
    if path is None:
        return {}
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("sbnotebook", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        print(f"sbnotebook: ignoring {path}: {exc}", file=sys.stderr)
        return {}
    names = set(known) - set(old)
    settings = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in names and name not in set(old):
            # Refused, not ignored: a misspelt setting would otherwise silently keep its default.
            from IPython.core.error import UsageError

            close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
            style = (lambda n: n.replace("_", "-")) if "-" in key else (lambda n: n)
            hint = (
                f": did you mean {style(close[0])}?"
                if close
                else f"; known: {', '.join(style(n) for n in sorted(names))}"
            )
            raise UsageError(f"unknown setting {key!r} in [tool.sbnotebook] of {path}{hint}")
        settings[name] = value
    return settings
