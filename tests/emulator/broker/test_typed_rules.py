"""Rules over application properties of every AMQP type, sent with the SDK (typed values, as a
.NET sender writes them), some missing: which subscription holds which message, read with the
SDK, is what the evaluator says; an action copying every property gives each back with its type.
The types the Python SDK cannot send or read back (char, decimal32, decimal64; decimal128, which
azure-servicebus 7.x writes but fails to decode, "Invalid AMQP decimal128 encoding") are sent as a
.NET sender would (encoded by proton) and counted through the administration API."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus._pyamqp._encode import encode_decimal128
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleAction, SqlRuleFilter
from proton import Message, char, decimal32, decimal64, decimal128

from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.emulator.amqp.codec import decode_transfer
from sbnotebook.emulator.broker.sqlvalues import decimal128_of, to_sql
from sbnotebook.sqlrules.context import MessageProperties
from sbnotebook.sqlrules.sqlfilter import compile_filter
from tests.emulator.broker.routing import TAG, peek_all, received
from tests.helpers import subscription_with_one_rule

pytestmark = pytest.mark.timeout(300)

T0 = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
G1, G2 = uuid.UUID("6b1f3c52-3f0e-4a57-9a39-2b8f1d0c7e41"), uuid.UUID("00000000-0000-0000-0000-000000000001")
PARAMETERS = {"@t": T0, "@h": HOUR}


def _ms(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


def _timespan(span: dt.timedelta) -> tuple[Any, Any]:
    """.NET's TimeSpan on the wire: ``com.microsoft:timespan`` describing a long of ticks (100 ns)."""
    return _described("com.microsoft:timespan", span // dt.timedelta(microseconds=1) * 10)


def _offset(t: dt.datetime) -> tuple[Any, Any]:
    """.NET's DateTimeOffset: ``com.microsoft:datetime-offset`` describing its UTC ticks since 0001-01-01."""
    return _described(
        "com.microsoft:datetime-offset", (t - dt.datetime(1, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1) * 10
    )


def _described(descriptor: str, ticks: int) -> tuple[Any, Any]:
    return ({TYPE: AMQPTypes.symbol, VALUE: descriptor}, {TYPE: AMQPTypes.long, VALUE: ticks})


# name, AMQP type, (sent, as the evaluator reads it) in the first and the second message, filter
TYPES: list[tuple[str, str, tuple[Any, Any], tuple[Any, Any], str]] = [
    ("u8", "ubyte", (200, 200), (1, 1), "u8 = 200 AND u8 + 1 = 201"),
    ("i8", "byte", (-5, -5), (5, 5), "i8 * 2 = -10"),
    ("u16", "ushort", (60000, 60000), (1, 1), "u16 > 59999"),
    ("i16", "short", (-300, -300), (300, 300), "i16 % 7 = -6"),
    ("u32", "uint", (4_000_000_000, 4_000_000_000), (1, 1), "u32 = 4000000000"),
    ("i32", "int", (-70000, -70000), (70000, 70000), "i32 / 3 = -23333"),
    ("u64", "ulong", (2**64 - 1, 2**64 - 1), (0, 0), "u64 > 0"),
    ("i64", "long", (-(2**40), -(2**40)), (2**40, 2**40), "i64 = -1099511627776"),
    ("f32", "float", (1.5, 1.5), (2.5, 2.5), "f32 * 2 = 3"),
    ("f64", "double", (2.25, 2.25), (3.0, 3.0), "f64 = 2.25"),
    ("ts", "timestamp", (_ms(T0), T0), (_ms(T0 + HOUR), T0 + HOUR), "ts = @t AND ts + @h > @t"),
    ("span", "described", (_timespan(HOUR), HOUR), (_timespan(2 * HOUR), 2 * HOUR), "span = @h"),
    ("dto", "described", (_offset(T0), T0), (_offset(T0 + HOUR), T0 + HOUR), "dto = @t AND dto < ts + @h"),
    ("g", "uuid", (G1, G1), (G2, G2), "g <> newid() AND g IS NOT NULL"),
    ("bin", "binary", (b"\x00\xff", b"\x00\xff"), (b"", b""), "EXISTS(bin) AND bin IS NOT NULL"),
    ("s", "string", ("text", "text"), ("other", "other"), "s LIKE 'te%'"),
    ("sym", "symbol", ("sym", "sym"), ("x", "x"), "sym = 'sym'"),
    ("flag", "boolean", (True, True), (False, False), "flag = TRUE"),
    ("nothing", "null", (None, None), (None, None), "nothing IS NULL AND EXISTS(nothing)"),
]


def _messages() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(tag, properties as sent, as the evaluator reads them): both sets of values, then every other
    property left out (each half once), then none."""
    out = []
    for tag, which, keep in [("first", 0, None), ("second", 1, None), ("even", 0, 0), ("odd", 0, 1), ("none", 0, 2)]:
        sent, read = {}, {}
        for i, (name, kind, *values, _) in enumerate(TYPES):
            if keep is not None and (keep == 2 or i % 2 != keep):
                continue
            value, natural = values[which]
            sent[name] = {TYPE: getattr(AMQPTypes, kind), VALUE: value}
            read[name] = natural
        out.append((tag, sent, read))
    return out


COPY = "; ".join(f"SET c_{name} = {name}" for name, *_ in TYPES)


def test_every_amqp_type_routes_as_the_evaluator_says_and_actions_keep_types(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    admin.create_topic("typed")
    for name, *_, sql in TYPES:
        subscription_with_one_rule(admin, "typed", f"t-{name}", "r", filter=SqlRuleFilter(sql, parameters=PARAMETERS))
    subscription_with_one_rule(
        admin, "typed", "copies", "copy", filter=SqlRuleFilter("1=1"), action=SqlRuleAction(COPY)
    )
    messages = _messages()
    with client.get_topic_sender("typed") as sender:
        sender.send_messages(
            [ServiceBusMessage(tag, application_properties={**sent, TAG: tag}) for tag, sent, _ in messages]
        )
    expected, got = {}, {}
    for name, *_, sql in TYPES:
        flt = compile_filter(sql, PARAMETERS)
        expected[name] = sorted(tag for tag, _, read in messages if flt.matches(MessageProperties(read)))
        got[name] = sorted(received(m)[0] for m in peek_all(client, "typed", f"t-{name}"))
    assert got == expected
    # Each filter takes the first message and the half that kept its property; present at all is
    # enough for g, bin and nothing (a null property exists: "odd" and "none" lack it).
    half = {name: "even" if i % 2 == 0 else "odd" for i, (name, *_) in enumerate(TYPES)}
    always = {"g", "bin", "nothing"}
    assert {n: sorted(["first", half[n]] + (["second"] if n in always else [])) for n in half} == expected
    # The action reads every property and sets a copy: the SDK reads back the same value, same type.
    copies = {tag: props for tag, (props, _) in map(received, peek_all(client, "typed", "copies"))}
    assert sorted(copies) == sorted(tag for tag, _, _ in messages)
    for tag, props in copies.items():
        for name, *_ in TYPES:
            original, copy = props.get(name), props[f"c_{name}"]
            if name == "dto" and original is not None:  # a DateTimeOffset is set back as a timestamp
                original = _ms(T0 if tag != "second" else T0 + HOUR)
            assert (copy, type(copy)) == (original, type(original)), (tag, name)
    assert copies["none"]["c_u8"] is None  # "Action doesn't fail if non-existent user properties were referenced"
    # The check can fail: two values of one type that differ.
    assert (copies["first"]["u8"], int) != (copies["second"]["u8"], int)


def _bid(sign: int, coefficient: int, exponent: int, width: int, ebits: int, bias: int) -> int:
    """IEEE 754-2008 binary integer decimal bits, both forms (the second when the coefficient
    needs the implicit 100 prefix)."""
    small = width - 1 - ebits
    if coefficient < 1 << small:
        return (sign << (width - 1)) | ((exponent + bias) << small) | coefficient
    return (
        (sign << (width - 1))
        | (0b11 << (width - 3))
        | ((exponent + bias) << (small - 2))
        | (coefficient & ((1 << (small - 2)) - 1))
    )


def _sdk_decimal128(value: Decimal) -> decimal128:
    """decimal128 as the SDK's encoder writes it."""
    out = bytearray()
    encode_decimal128(out, value, with_constructor=False)
    return decimal128(bytes(out))


def test_decimals_read_as_decimal_in_both_binary_forms() -> None:
    """The SDK's own encoder for decimal128; decimal32/64 bits written by hand (both forms)."""
    for value in (Decimal("12.50"), Decimal("-0.001"), Decimal("79228162514264337593543950335")):
        assert to_sql(_sdk_decimal128(value)) == value
        assert decimal128_of(value) == _sdk_decimal128(value)  # what an action writes: the same bytes
    assert to_sql(decimal32(_bid(0, 15, -1, 32, 8, 101))) == Decimal("1.5")
    assert to_sql(decimal32(_bid(1, 9_999_999, 2, 32, 8, 101))) == Decimal("-999999900")  # the second form
    assert to_sql(decimal64(_bid(0, 1234, 0, 64, 10, 398))) == Decimal(1234)
    assert to_sql(decimal64(_bid(0, 9_999_999_999_999_999, -3, 64, 10, 398))) == Decimal("9999999999999.999")
    assert to_sql(decimal32(_bid(0, 16, -1, 32, 8, 101))) != Decimal("1.5")  # the check tells values apart


def test_char_and_the_small_decimals_route_as_the_evaluator_says(emulator: Emulator) -> None:
    """char (as a one-character string), decimal32, decimal64 and decimal128 (as Decimal), from a proton sender."""
    admin = emulator_admin_client(emulator.connection_string)
    filters = {
        "c": "c = 'x'",
        "d32": "d32 * 10 = 15",
        "d32b": "d32b = -999999900",
        "d64": "d64 = 1234",
        "d128": "d128 * 2 = 25 AND d128 > 12",
    }
    admin.create_topic("small")
    for name, sql in filters.items():
        subscription_with_one_rule(admin, "small", name, "r", filter=SqlRuleFilter(sql))
    values = [
        {
            "c": char("x"),
            "d32": decimal32(_bid(0, 15, -1, 32, 8, 101)),
            "d32b": decimal32(_bid(1, 9_999_999, 2, 32, 8, 101)),
            "d128": _sdk_decimal128(Decimal("12.50")),
        },
        {
            "c": char("y"),
            "d32": decimal32(_bid(0, 16, -1, 32, 8, 101)),
            "d64": decimal64(_bid(0, 1234, 0, 64, 10, 398)),
            "d128": _sdk_decimal128(Decimal("12.49")),
        },
    ]
    for props in values:
        emulator.broker.send("small", decode_transfer(Message(body="m", properties=props).encode()))
    for name, sql in filters.items():
        flt = compile_filter(sql)
        expected = sum(flt.matches(MessageProperties({k: to_sql(v) for k, v in p.items()})) for p in values)
        count = admin.get_subscription_runtime_properties("small", name).active_message_count
        assert (name, count) == (name, expected) and expected == 1


def test_correlation_properties_of_every_type_the_api_carries(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """A correlation filter's properties with the XML Schema types the administration API gives
    them (dateTime and long included) match messages carrying those values, and only those."""
    from azure.servicebus.management import CorrelationRuleFilter

    wanted = {"at": T0, "n": 3, "big": 2**40, "ok": True, "r": 2.5, "s": "x"}
    admin.create_topic("corr")
    subscription_with_one_rule(admin, "corr", "typed", "r", filter=CorrelationRuleFilter(properties=wanted))
    same = {**wanted, "big": {TYPE: AMQPTypes.long, VALUE: 2**40}}
    with client.get_topic_sender("corr") as sender:
        sender.send_messages(
            [
                ServiceBusMessage("m", application_properties={**same, TAG: "same"}),
                ServiceBusMessage("m", application_properties={**same, "at": T0 + HOUR, TAG: "later"}),
                ServiceBusMessage("m", application_properties={**same, "n": "3", TAG: "text"}),
            ]
        )
    assert [received(m)[0] for m in peek_all(client, "corr", "typed")] == ["same"]
