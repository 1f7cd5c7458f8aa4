""".NET's types as the SDKs put them on the wire, read as filters compare them: AMQP decimals
(IEEE 754-2008, the binary integer encoding) as ``Decimal`` (``System.Decimal``), the described
``com.microsoft:timespan`` and ``com.microsoft:datetime-offset`` (ticks) as ``timedelta`` and
``datetime``. The one reader, for the broker (``emulator/broker/sqlvalues.py``, proton's values)
and core's ``route`` (a message's encoded bytes, an export's forms)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TIMESPAN = "com.microsoft:timespan"
DATETIME_OFFSET = "com.microsoft:datetime-offset"
_TICKS_AT_EPOCH = 621355968000000000  # .NET ticks (100 ns since 0001-01-01) at 1970-01-01

# width in bits -> (exponent bits, bias)
_BID = {32: (8, 101), 64: (10, 398), 128: (14, 6176)}


def bid_decimal(bits: int, width: int) -> Decimal:
    """The decimal32, decimal64 or decimal128 (``width``) whose encoding, as an unsigned integer,
    is ``bits``: exact, no context rounding; infinities and NaN as Decimal has them."""
    ebits, bias = _BID[width]
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
    return Decimal((sign, tuple(int(d) for d in str(coefficient)), exponent - bias))


def encoded_decimal(raw: bytes) -> Decimal:
    """A decimal from its 4, 8 or 16 encoded bytes (network order, as AMQP writes them)."""
    return bid_decimal(int.from_bytes(raw, "big"), len(raw) * 8)


def described_value(descriptor: str, ticks: int) -> dt.timedelta | dt.datetime | None:
    """A TimeSpan or DateTimeOffset (ticks, described); None for another descriptor."""
    if descriptor == TIMESPAN:
        return dt.timedelta(microseconds=ticks // 10)
    if descriptor == DATETIME_OFFSET:
        return EPOCH + dt.timedelta(microseconds=(ticks - _TICKS_AT_EPOCH) // 10)
    return None
