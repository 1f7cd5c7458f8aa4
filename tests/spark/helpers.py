"""What the Spark tests share: a batch or streaming read of the `servicebus` format with options (each
given as text, as a notebook gives them), and the files a grep for a leaked key reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _options(reader: Any, entity: str, options: dict[str, Any]) -> Any:
    reader = reader.format("servicebus").option("entity", entity)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader


def read(spark: Any, entity: str, **options: Any) -> Any:
    """``spark.read.format("servicebus")`` of ``entity`` with ``options``."""
    return _options(spark.read, entity, options).load()


def stream(spark: Any, entity: str, **options: Any) -> Any:
    """``spark.readStream.format("servicebus")`` of ``entity`` with ``options``."""
    return _options(spark.readStream, entity, options).load()


def logged(events: Path, *logs: Path) -> list[bytes]:
    """Every file of a Spark event log directory, then each of ``logs`` (a server's log), as bytes."""
    return [p.read_bytes() for p in events.rglob("*") if p.is_file()] + [log.read_bytes() for log in logs]
