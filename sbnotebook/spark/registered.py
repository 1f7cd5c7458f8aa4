"""The connection ``register()`` resolved in this process: one place that the data source's helpers
(settle, write, body-schema inference) read, instead of a class attribute of the data source."""

from __future__ import annotations

import os

from ..core import ENV_CONNECTION_STRING, ENV_NAMESPACE, ConfigurationError, resolve
from .secrets import Source

_default: Source | None = None


def set_default(source: Source) -> None:
    """What ``register()`` resolved (a Connection, a secret or credential reference)."""
    global _default
    _default = source


def default() -> Source | None:
    return _default


def registered_connection() -> Source:
    """What register() resolved in this process, else the environment. Never a new embedded emulator:
    settling against a broker that never saw these messages would report "not found" for all of them."""
    if _default is not None:
        return _default
    if os.environ.get(ENV_CONNECTION_STRING) or os.environ.get(ENV_NAMESPACE):
        return resolve()
    raise ConfigurationError(
        "settle() does not know where these messages are: pass connection=..., or call "
        "sbnotebook.spark.register(spark, connection) in this notebook first."
    )
