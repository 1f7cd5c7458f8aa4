"""A stream's body schema, recorded in its checkpoint: every offset the stream reader writes carries
the body_json schema (DDL), so a restart whose schema differs (inferred again from newer messages,
or another bodySchema) fails at once with the recorded schema to pin, instead of writing rows of
another shape into the same sink. The reader's batches get their body columns (spark/bodies.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .bodies import BodyColumns
from .body_schema import ddl
from .options import OptionError
from .streaming import ServiceBusStreamReader

KEY = "bodySchema"  # in the offset JSON, which Spark keeps in the checkpoint's offsets log
_CLASSES: dict[type, type] = {}


class BodySchemaRecorded:
    """Mixed into the stream reader's own class (whatever class this pyspark version needs)."""

    body: BodyColumns
    recorded: str | None

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()  # type: ignore[assignment]
        return {**state, "body": self.body, "recorded": self.recorded}

    def initialOffset(self) -> dict[str, Any]:
        return self._stamp(super().initialOffset())  # type: ignore[misc]

    def latestOffset(self, *args: Any) -> dict[str, Any]:
        if args:
            self._check(args[0])
        return self._stamp(super().latestOffset(*args))  # type: ignore[misc]

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
        self._check(end)
        return super().partitions(start, end)  # type: ignore[misc]

    def read(self, partition: Any) -> Iterator[Any]:
        chunk = partition.value
        what = f"stream read of {self.options.entity} task {getattr(chunk, 'index', 0)}"  # type: ignore[attr-defined]
        yield from self.body.apply(super().read(partition), what)  # type: ignore[misc]

    def _stamp(self, offset: dict[str, Any]) -> dict[str, Any]:
        if self.recorded is not None:
            offset[KEY] = self.recorded  # in place: the reader compares its pending offset by value
        return offset

    def _check(self, offset: dict[str, Any]) -> None:
        recorded = offset.get(KEY)
        if recorded == self.recorded:
            return
        entity = self.options.entity  # type: ignore[attr-defined]
        was = f"bodySchema {recorded!r}" if recorded is not None else "no body_json column (bodyFormat binary or text)"
        now = f"bodySchema {self.recorded!r}" if self.recorded is not None else "no body_json column"
        pin = (
            f" To go on with this checkpoint, pin the recorded schema: .option('bodySchema', {recorded!r})."
            if recorded is not None
            else " To go on with this checkpoint, read it as it was (without bodyFormat=json)."
        )
        raise OptionError(
            f"servicebus: the body schema of this stream of {entity} changed since its checkpoint was written: "
            f"the checkpoint has {was}, this query has {now}.{pin} To use the new schema, let the running query "
            "commit its last batch, then start it with a new checkpointLocation."
        )


class BodyStreamReader(BodySchemaRecorded, ServiceBusStreamReader):
    """The stream reader with its body schema recorded in every offset."""


def attach(reader: Any, body: BodyColumns) -> Any:
    """The same reader, its class extended with the body schema's recording and the body columns."""
    base = type(reader)
    cls: Any = BodyStreamReader if base is ServiceBusStreamReader else _CLASSES.get(base)
    if cls is None:  # another reader class (another pyspark's): made here, cloudpickle ships it by value
        cls = _CLASSES[base] = type(f"{base.__name__}WithBodySchema", (BodySchemaRecorded, base), {})
    extended = cls.__new__(cls)
    extended.__dict__.update(vars(reader))
    extended.body = body
    extended.recorded = ddl(body.struct) if body.struct is not None else None
    return extended
