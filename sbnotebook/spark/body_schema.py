"""The body schema of ``bodyFormat=json``: inferred from a peeked sample with the rules of Spark's JSON
reader (:func:`infer`), and written as the DDL the ``bodySchema`` option takes (:func:`ddl`). Runs on
the planning side (the driver, or the Spark Connect server) and in ``sbspark.infer_body_schema``."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from ..core import PAGE_SIZE, SbError, scan_records
from .options import OptionError

log = logging.getLogger("sbnotebook.spark")


def infer(bodies: Iterable[bytes | str | None]) -> Any:
    """The StructType Spark's JSON reader infers for these bodies (JsonInferSchema, default options):
    integers bigint (decimal(p,0) beyond 64 bits), other numbers double, fields sorted by name,
    conflicting types widened (bigint+double: double) or else string, nulls and empty arrays string,
    empty objects dropped. Bodies that are not JSON objects are left out (they are rescued at read)."""
    from pyspark.sql.types import NullType, StructType

    merged: Any = NullType()
    for body in bodies:
        value = json_value(body)
        if isinstance(value, dict):
            merged = _compatible(merged, _infer_value(value))
    out = _canonical(merged)
    return out if isinstance(out, StructType) else StructType([])


def json_value(body: bytes | str | None) -> Any:
    """The body parsed as JSON, or None when it is not JSON (it is rescued at read)."""
    if body is None:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _infer_value(value: Any) -> Any:
    from pyspark.sql import types as T

    if value is None:
        return T.NullType()
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return T.LongType()
        digits = len(str(abs(value)))
        return T.DecimalType(digits, 0) if digits <= 38 else T.DoubleType()
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, str):
        return T.StringType()
    if isinstance(value, list):
        element: Any = T.NullType()
        for item in value:
            element = _compatible(element, _infer_value(item))
        return T.ArrayType(element, True)
    fields = [T.StructField(k, _infer_value(v), True) for k, v in sorted(value.items())]
    return T.StructType(fields)


def _compatible(a: Any, b: Any) -> Any:
    from pyspark.sql import types as T

    if a == b:
        return a
    if isinstance(a, T.NullType):
        return b
    if isinstance(b, T.NullType):
        return a
    numeric = (T.LongType, T.DoubleType, T.DecimalType)
    if isinstance(a, numeric) and isinstance(b, numeric):
        if isinstance(a, T.DoubleType) or isinstance(b, T.DoubleType):
            return T.DoubleType()
        da = T.DecimalType(20, 0) if isinstance(a, T.LongType) else a
        db = T.DecimalType(20, 0) if isinstance(b, T.LongType) else b
        scale = max(da.scale, db.scale)
        whole = max(da.precision - da.scale, db.precision - db.scale)
        return T.DoubleType() if whole + scale > 38 else T.DecimalType(whole + scale, scale)
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        types = {f.name: f.dataType for f in a.fields}
        for f in b.fields:
            types[f.name] = _compatible(types[f.name], f.dataType) if f.name in types else f.dataType
        return T.StructType([T.StructField(n, types[n], True) for n in sorted(types)])
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return T.ArrayType(_compatible(a.elementType, b.elementType), True)
    return T.StringType()


def _canonical(t: Any) -> Any:
    """None for what Spark drops (an empty struct); NullType becomes string."""
    from pyspark.sql import types as T

    if isinstance(t, T.NullType):
        return T.StringType()
    if isinstance(t, T.ArrayType):
        element = _canonical(t.elementType)
        return None if element is None else T.ArrayType(element, True)
    if isinstance(t, T.StructType):
        fields = [
            T.StructField(f.name, c, True) for f in t.fields if f.name and (c := _canonical(f.dataType)) is not None
        ]
        return T.StructType(fields) if fields else None
    return t


def ddl(struct: Any) -> str:
    """A StructType as the column list bodySchema takes: "`a` bigint, `b` struct<`c`: string>"."""
    return ", ".join(f"{_quote(f.name)} {_type_ddl(f.dataType)}" for f in struct.fields)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _type_ddl(t: Any) -> str:
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        return "struct<" + ", ".join(f"{_quote(f.name)}: {_type_ddl(f.dataType)}" for f in t.fields) + ">"
    if isinstance(t, T.ArrayType):
        return f"array<{_type_ddl(t.elementType)}>"
    if isinstance(t, T.MapType):
        return f"map<{_type_ddl(t.keyType)}, {_type_ddl(t.valueType)}>"
    return str(t.simpleString())


def struct_ddl(given: str) -> str:
    """bodySchema as a struct type: a column list ("a bigint, b string") or a struct<...> as given."""
    text = given.strip()
    return text if text.lower().startswith("struct<") else f"struct<{text}>"


def sample_bodies(conn: Any, path: Any, start: int, sample: int) -> list[bytes]:
    """Up to `sample` bodies from `start` on, peeked (nothing locked, nothing counted): one round trip
    for a sample of up to one peek page, a few for a bigger one."""
    records = scan_records(
        path, from_sequence_number=max(start, 1), max_messages=sample, page_size=min(sample, PAGE_SIZE), connection=conn
    )
    return [r["body"] for r in records]


def inferred_struct(conn: Any, path: Any, start: int, sample: int) -> Any:
    """The body schema of `path` from a peeked sample; a clear error when the sample has no JSON object."""
    try:
        bodies = sample_bodies(conn, path, start, sample)
    except SbError as exc:
        raise OptionError(
            f"servicebus: cannot peek {path} to infer the body schema ({str(exc).splitlines()[0]}): "
            "give it with the bodySchema option."
        ) from None
    struct = infer(bodies)
    if not struct.fields:
        raise OptionError(
            f"servicebus: cannot infer a body schema: none of the {len(bodies)} bodies peeked from {path} is a "
            "JSON object with fields; give it with the bodySchema option (for example .option('bodySchema', "
            "'id bigint, kind string'))."
        )
    log.info("servicebus: body schema of %s inferred from %d bodies: %s", path, len(bodies), ddl(struct))
    return struct
