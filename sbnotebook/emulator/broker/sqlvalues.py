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

from ...sqlrules.dotnet import DATETIME_OFFSET, EPOCH, TIMESPAN, bid_decimal, described_value

_BID_WIDTH = {decimal32: 32, decimal64: 64, decimal128: 128}  # proton's decimal types, by width


def decimal128_of(value: Decimal) -> decimal128:
    """A finite Decimal (within System.Decimal's range) as an AMQP decimal128."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)) or "0")
    bits = (sign << 127) | ((exponent + 6176) << 113) | coefficient
    return decimal128(bits.to_bytes(16, "big"))


def to_sql(value: Any) -> Any:
    """An application property's value as filters read it."""
    cls = type(value)
    if cls is timestamp:
        return EPOCH + dt.timedelta(milliseconds=int(value))
    if cls in _BID_WIDTH:
        bits = int.from_bytes(value, "big") if cls is decimal128 else int(value)
        return bid_decimal(bits, _BID_WIDTH[cls])
    if cls is Described and value.descriptor in (TIMESPAN, DATETIME_OFFSET) and isinstance(value.value, int):
        return described_value(value.descriptor, value.value)
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
