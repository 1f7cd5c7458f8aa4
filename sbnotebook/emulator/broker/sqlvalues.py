"""AMQP values as the SQL evaluator takes them (``sbnotebook/sqlrules/semantics.py``), and back.

The SDKs send a .NET ``DateTime`` as an AMQP timestamp, ``decimal`` as decimal128, ``TimeSpan`` and
``DateTimeOffset`` as the described types ``com.microsoft:timespan`` / ``com.microsoft:datetime-offset``
(ticks); proton hands them over as raw numbers and bytes. Filters read them as datetime, Decimal and
timedelta; a value an action sets goes back to its AMQP type. Other values pass as they are.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from proton import Described, decimal32, decimal64, decimal128, symbol, timestamp

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TICKS_AT_EPOCH = 621355968000000000  # .NET ticks (100 ns since 0001-01-01) at 1970-01-01
TIMESPAN = "com.microsoft:timespan"
DATETIME_OFFSET = "com.microsoft:datetime-offset"
# IEEE 754-2008 decimals in the binary integer encoding: (width, exponent bits, bias)
_BID = {decimal32: (32, 8, 101), decimal64: (64, 10, 398), decimal128: (128, 14, 6176)}


def _bid_decimal(bits: int, width: int, ebits: int, bias: int) -> Decimal:
    sign = bits >> (width - 1)
    top = (bits >> (width - 6)) & 0b11111
    if top >> 1 == 0b1111:
        return Decimal(("-" if sign else "") + ("NaN" if top & 1 else "Infinity"))
    small = width - 1 - ebits  # coefficient bits of the usual form
    if (bits >> (width - 3)) & 0b11 == 0b11:  # the form for coefficients of 2^small and more
        exponent = (bits >> (small - 2)) & ((1 << ebits) - 1)
        coefficient = (0b100 << (small - 2)) | (bits & ((1 << (small - 2)) - 1))
    else:
        exponent = (bits >> small) & ((1 << ebits) - 1)
        coefficient = bits & ((1 << small) - 1)
    return Decimal((sign, tuple(int(d) for d in str(coefficient)), exponent - bias))  # exact: no context rounding


def decimal128_of(value: Decimal) -> decimal128:
    """A finite Decimal (within System.Decimal's range) as an AMQP decimal128."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)) or "0")
    bits = (sign << 127) | ((exponent + 6176) << 113) | coefficient
    return decimal128(bits.to_bytes(16, "big"))


def _ticks_time(ticks: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=(ticks - _TICKS_AT_EPOCH) // 10)


def to_sql(value: Any) -> Any:
    """An application property's value as filters read it."""
    cls = type(value)
    if cls is timestamp:
        return EPOCH + dt.timedelta(milliseconds=int(value))
    if cls in _BID:
        bits = int.from_bytes(value, "big") if cls is decimal128 else int(value)
        return _bid_decimal(bits, *_BID[cls])
    if cls is Described:
        if value.descriptor == TIMESPAN and isinstance(value.value, int):
            return dt.timedelta(microseconds=value.value // 10)
        if value.descriptor == DATETIME_OFFSET and isinstance(value.value, int):
            return _ticks_time(value.value)
    return value


def to_amqp(value: Any) -> Any:
    """A value an action computed, in the AMQP type a .NET sender would give it."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return timestamp((aware - EPOCH) // dt.timedelta(milliseconds=1))
    if isinstance(value, dt.timedelta):
        return Described(symbol(TIMESPAN), value // dt.timedelta(microseconds=1) * 10)
    if isinstance(value, Decimal):
        return decimal128_of(value)
    return value
