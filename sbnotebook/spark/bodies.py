"""Message bodies as columns: what the ``bodyFormat`` / ``bodySchema`` / ``bodySampleSize`` read options
(parsed with the others in ``spec.py``) do.

``bodyFormat=json`` adds a ``body_json`` struct column and a ``_rescued_body`` string column. The
struct's schema is ``bodySchema`` (DDL) when given, else inferred on the planning side from a peeked
sample with the rules of Spark's JSON reader (``body_schema.py``). A body that is not a JSON object, or
does not fit the schema (a value of another type, a field the schema lacks), keeps its raw text in
``_rescued_body``; what fits is still in ``body_json``. Nothing is dropped.

Parsing (:class:`BodyColumns`) runs per Arrow batch: pyarrow's JSON reader parses the whole batch
in C++ when every body fits; only a batch with a misfit is parsed body by body in Python. A struct
body written back is sent as JSON by the write path (``writing.py``).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

from ..core import SbError, utf8
from .body_schema import inferred_struct, json_value, struct_ddl
from .options import OptionError
from .schema import RECORD_DDL, record_schema
from .secrets import connection_of
from .spec import BodyOptions, ReadSpec

log = logging.getLogger("sbnotebook.spark")

BODY_JSON = "body_json"
RESCUED = "_rescued_body"


# ------------------------------------------------------------------ parsing at read


class BodyColumns:
    """Adds the body columns to each record batch a read yields (runs on executors)."""

    def __init__(self, body_format: str, struct: Any | None) -> None:
        self.format = body_format
        self.struct: Any = struct  # the body_json StructType (json only), as Spark planned it
        self._arrow: Any = None

    def arrow_type(self) -> Any:
        if self._arrow is None:
            self._arrow = arrow_type(self.struct)
        return self._arrow

    def apply(self, batches: Iterator[Any], what: str) -> Iterator[Any]:
        """Each batch with its body columns; one log line for the whole read of this partition."""
        if self.format == "binary":
            yield from batches
            return
        rows = misfits = 0
        for batch in batches:
            out, bad = self.add(batch)
            rows += batch.num_rows
            misfits += bad
            yield out
        kind = "not JSON objects or not fitting the schema" if self.format == "json" else "not UTF-8 text"
        (log.warning if misfits else log.info)(
            "servicebus %s: %d bodies as %s, %d %s%s",
            what,
            rows,
            self.format,
            misfits,
            kind,
            " (raw text in _rescued_body)" if self.format == "json" and misfits else "",
        )

    def add(self, batch: Any) -> tuple[Any, int]:
        import pyarrow as pa

        bodies = batch.column(batch.schema.get_field_index("body")).to_pylist()
        if self.format == "text":
            texts = [None if b is None else utf8(b) for b in bodies]
            i = batch.schema.get_field_index("body_text")
            column = pa.array(texts, pa.string())
            return batch.set_column(i, batch.schema.field(i), column), sum(
                1 for b, t in zip(bodies, texts, strict=True) if b is not None and t is None
            )
        parsed = self._fast(bodies)
        if parsed is not None:
            rescued = pa.nulls(len(bodies), pa.string())
            bad = 0
        else:
            parsed, rescued, bad = self._slow(bodies)
        columns = [*batch.columns, parsed, rescued]
        names = [*batch.schema.names, BODY_JSON, RESCUED]
        return pa.RecordBatch.from_arrays(columns, names=names), bad

    def _fast(self, bodies: list[bytes | None]) -> Any:
        """The whole batch through pyarrow's JSON reader, or None when a body does not fit (a body that
        spans lines, is empty, is not an object, has a value of another type or a field the schema lacks)."""
        import pyarrow as pa
        import pyarrow.json as pj

        if not bodies or any(not b for b in bodies):
            return None
        buffer = b"\n".join(b for b in bodies if b)
        if buffer.count(b"\n") != len(bodies) - 1:
            return None
        struct = self.arrow_type()
        schema = pa.schema(list(struct))
        try:
            table = pj.read_json(
                io.BytesIO(buffer),
                read_options=pj.ReadOptions(use_threads=False, block_size=max(len(buffer) + 1, 1 << 20)),
                parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(bodies):
            return None
        table = table.select(schema.names).cast(schema)
        arrays = [c.combine_chunks() for c in table.columns]
        return pa.StructArray.from_arrays(arrays, fields=list(struct))

    def _slow(self, bodies: list[bytes | None]) -> tuple[Any, Any, int]:
        """Body by body: what fits goes to body_json (a misfit field null), the raw text of a misfit body
        to _rescued_body."""
        import pyarrow as pa

        values: list[Any] = []
        rescued: list[str | None] = []
        for body in bodies:
            value = json_value(body) if body else None
            if not isinstance(value, dict):
                values.append(None)
                rescued.append(None if body is None else _raw_text(body))
                continue
            fits = _Fit()
            values.append(_convert(value, self.struct, fits))
            rescued.append(None if fits.ok or body is None else _raw_text(body))
        bad = sum(1 for r in rescued if r is not None)
        return pa.array(values, self.arrow_type()), pa.array(rescued, pa.string()), bad


def arrow_type(t: Any) -> Any:
    """A Spark type as the Arrow type a Python data source yields for it (timestamps UTC, as the
    record schema's; pyspark's own converter changed its signature between releases)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType)) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return pa.list_(arrow_type(t.elementType))
    if isinstance(t, T.MapType):
        return pa.map_(arrow_type(t.keyType), arrow_type(t.valueType))
    if isinstance(t, T.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    simple = {
        T.BooleanType: pa.bool_(),
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.StringType: pa.string(),
        T.VarcharType: pa.string(),
        T.CharType: pa.string(),
        T.BinaryType: pa.binary(),
        T.DateType: pa.date32(),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
        T.TimestampNTZType: pa.timestamp("us"),
        T.NullType: pa.null(),
    }
    for kind, arrow in simple.items():
        if isinstance(t, kind):
            return arrow
    raise OptionError(f"servicebus: bodySchema: {t.simpleString()} is not a type a JSON body can be read into.")


def _raw_text(body: bytes) -> str:
    """The body as text; bytes that are not UTF-8 become U+FFFD (the exact bytes stay in `body`)."""
    return body.decode("utf-8", errors="replace")


class _Fit:
    ok = True


def _convert(value: Any, t: Any, fits: _Fit) -> Any:
    """A parsed JSON value as Spark's JSON parser reads it into type `t`; a value that does not fit
    becomes None and clears `fits`."""
    from pyspark.sql import types as T

    if value is None:
        return None
    try:
        if isinstance(t, T.StructType):
            if not isinstance(value, dict):
                raise _Misfit
            names = {f.name for f in t.fields}
            if any(k not in names for k in value):
                fits.ok = False  # a field the schema lacks: rescued, the known fields kept
            return {f.name: _convert(value.get(f.name), f.dataType, fits) for f in t.fields}
        if isinstance(t, T.ArrayType):
            if not isinstance(value, list):
                raise _Misfit
            return [_convert(v, t.elementType, fits) for v in value]
        if isinstance(t, T.MapType):
            if not isinstance(value, dict):
                raise _Misfit
            return [(str(k), _convert(v, t.valueType, fits)) for k, v in value.items()]
        if isinstance(t, (T.StringType, T.VarcharType, T.CharType)):
            # Spark's parser reads any JSON value into a string field as its JSON text.
            return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        if isinstance(t, T.BooleanType):
            if not isinstance(value, bool):
                raise _Misfit
            return value
        if isinstance(t, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise _Misfit
            bits = {T.LongType: 64, T.IntegerType: 32, T.ShortType: 16, T.ByteType: 8}[type(t)]
            if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                raise _Misfit
            return value
        if isinstance(t, (T.DoubleType, T.FloatType)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
                    return float(value)
                raise _Misfit
            return float(value)
        if isinstance(t, T.DecimalType):
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise _Misfit
            number = decimal.Decimal(str(value)).quantize(decimal.Decimal(1).scaleb(-t.scale))
            if len(number.as_tuple().digits) > t.precision:
                raise _Misfit
            return number
        if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
            if not isinstance(value, str):
                raise _Misfit
            stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            if isinstance(t, T.TimestampType):
                return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
            return stamp.replace(tzinfo=None)
        if isinstance(t, T.DateType):
            if not isinstance(value, str):
                raise _Misfit
            return dt.date.fromisoformat(value)
        if isinstance(t, T.BinaryType):
            if not isinstance(value, str):
                raise _Misfit
            return base64.b64decode(value, validate=True)
    except (_Misfit, ValueError, decimal.InvalidOperation):
        fits.ok = False
        return None
    fits.ok = False
    return None


class _Misfit(SbError):
    """A JSON value of another type than the schema's (caught where it is raised: the value reads as null)."""

    def __init__(self, message: str = "a JSON value of another type than the schema's") -> None:
        super().__init__(message)


# ------------------------------------------------------------------ the data source's schema


def read_schema(spec: ReadSpec) -> Any:
    """The DataFrame's schema: the record schema, and with bodyFormat=json the body columns. A given
    bodySchema goes to Spark as DDL (Spark parses it, its errors name the bad part); else the body
    schema is inferred here, at planning, from a peeked sample."""
    from pyspark.sql.types import StringType, StructField, StructType

    body = spec.body
    if body.format != "json":
        return record_schema()
    if body.schema:
        return f"{RECORD_DDL}, `{BODY_JSON}` {struct_ddl(body.schema)}, `{RESCUED}` string"
    path = spec.entity
    conn = connection_of(spec.connection)
    struct = inferred_struct(conn, path, spec.body_sample_from, body.sample)
    fields = [*record_schema().fields, StructField(BODY_JSON, struct, True), StructField(RESCUED, StringType(), True)]
    return StructType(fields)


def body_columns(body: BodyOptions, schema: Any) -> BodyColumns:
    """What read() adds, from the schema Spark planned (the one schema() gave, or the user's own)."""
    if body.format != "json":
        return BodyColumns(body.format, None)
    names = {f.name: f.dataType for f in schema.fields}
    from pyspark.sql.types import StructType

    if not isinstance(names.get(BODY_JSON), StructType) or RESCUED not in names:
        raise OptionError(
            f"servicebus: bodyFormat=json needs the columns {BODY_JSON} (a struct) and {RESCUED} (a string) in "
            "the schema: leave .schema() out (the body schema goes in the bodySchema option)."
        )
    return BodyColumns("json", names[BODY_JSON])
