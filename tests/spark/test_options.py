"""One option parser for batch reads and streams (sbnotebook/spark/spec.py, on the value parsers of
sbnotebook/spark/options.py): the options both take are parsed once, the same way, with one message
each; each kind adds its own. Runs the parsers in this process (no JVM) against the emulator, which
answers the entity check."""

from __future__ import annotations

import pickle

import pytest

from sbnotebook import core
from sbnotebook.core import EntityPath
from sbnotebook.emulator import Emulator
from tests.helpers import counted_parses
from tests.required import require_module

require_module("pyspark")
from sbnotebook.spark.options import OptionError  # noqa: E402
from sbnotebook.spark.spec import ReadOptions, ReadSpec, StreamOptions  # noqa: E402


def parse(kind: str, options: dict[str, str]) -> ReadOptions | StreamOptions:
    """What reader() (kind "read") or streamReader() ("stream") parses, with 2 default partitions."""
    spec = ReadSpec(options, 2, None)
    return spec.read() if kind == "read" else spec.stream()


@pytest.mark.parametrize("kind", ["read", "stream"])
def test_batch_and_stream_parse_the_shared_options_alike(emulator: Emulator, kind: str) -> None:
    given = {"entity": "q", "connectionString": emulator.connection_string, "numPartitions": "3", "maxInFlight": "4"}
    parsed = parse(kind, given)
    assert (str(parsed.entity), parsed.num_partitions, parsed.max_in_flight) == ("q", 3, 4)
    # settings as they are, resolved once
    assert parsed.conn().fully_qualified_namespace == parsed.connection.fully_qualified_namespace
    assert parsed.wait_seconds == (5.0 if kind == "read" else 1.0)  # each kind's own default
    for bad, said in [
        ({"numPartitions": "0"}, "option numPartitions must be 1 or more, not 0."),
        ({"maxInFlight": "x"}, "option maxInFlight must be a whole number of 1 or more, not 'x'."),
        ({"waitSeconds": "-1"}, "option waitSeconds must be more than 0 seconds, not -1."),
        ({"waitSeconds": "0"}, "option waitSeconds must be more than 0 seconds, not 0."),
        ({"maxInFlight": "0"}, "option maxInFlight must be a whole number of 1 or more, not 0."),
        ({"maxInFlight": "-2"}, "option maxInFlight must be a whole number of 1 or more, not -2."),
        ({"entity": "nope"}, "entity not found: nope"),
    ]:
        with pytest.raises(OptionError, match=said.replace(".", r"\.")):
            parse(kind, {**given, **bad})
    with pytest.raises(OptionError, match="the 'entity' option is required"):
        parse(kind, {"maxInFlight": "x"})  # a missing entity is said first


def test_each_kind_keeps_its_own_options(emulator: Emulator) -> None:
    conn = {"connectionString": emulator.connection_string}
    read = ReadSpec({"entity": "q", "mode": "defer", **conn}, 2, None).read()
    assert (read.mode, read.max_messages, read.session_enabled) == ("defer", 1000, False)  # a destructive bound
    stream = ReadSpec({"entity": "sq", "sessionIds": "*", **conn}, 2, None).stream()
    assert (stream.max_per_trigger, stream.session) == (1000, "*")
    # The read's name for sessions, and its forms: a stream takes one id (or *), a read several (or *).
    assert ReadSpec({"entity": "sq", "sessionIds": "s-1", **conn}, 2, None).stream().session == "s-1"
    with pytest.raises(OptionError, match="sessionIds of a stream is one session id, or \\* for every session"):
        ReadSpec({"entity": "sq", "sessionIds": "s-1,s-2", **conn}, 2, None).stream()
    assert ReadSpec({"entity": "sq", "sessionIds": "*", **conn}, 2, None).read().sessions is None
    assert ReadSpec({"entity": "sq", "sessionIds": "a, b", **conn}, 2, None).read().sessions == ("a", "b")
    with pytest.raises(OptionError, match="is \\* \\(every session\\) or session ids, not both"):
        ReadSpec({"entity": "sq", "sessionIds": "*,a", **conn}, 2, None).read()
    with pytest.raises(OptionError, match="a stream always reads in peek-lock"):
        parse("stream", {"entity": "q", "mode": "peek", **conn})
    with pytest.raises(OptionError, match="requires sessions, and mode=defer does not support them"):
        parse("read", {"entity": "sq", "mode": "defer", **conn})


def test_counts_and_limits_are_refused_never_replaced(emulator: Emulator) -> None:
    """0 or less is refused at planning, naming the option; a value given is used as given (0 for
    fromSequenceNumber was read as 1, and maxInFlight 0 as 10, when the parser ended in ``or default``)."""
    conn = {"entity": "q", "connectionString": emulator.connection_string}
    for kind, bad, said in [
        ("read", {"maxMessages": "0"}, "option maxMessages must be 1 or more, not 0."),
        ("read", {"mode": "defer", "maxMessages": "-5"}, "option maxMessages must be 1 or more, not -5."),
        ("read", {"fromSequenceNumber": "-1"}, "option fromSequenceNumber must be 0 or more, not -1."),
        ("stream", {"maxMessagesPerTrigger": "0"}, "option maxMessagesPerTrigger must be 1 or more, not 0."),
    ]:
        with pytest.raises(OptionError, match=said.replace(".", r"\.")):
            parse(kind, {**conn, **bad})
    assert ReadSpec({**conn, "fromSequenceNumber": "0"}, 2, None).read().from_sequence_number == 0
    parsed = ReadSpec({**conn, "maxInFlight": "1", "numPartitions": "1", "waitSeconds": "0.5"}, 2, None).read()
    assert (parsed.max_in_flight, parsed.num_partitions, parsed.wait_seconds) == (1, 1, 0.5)


def test_register_refuses_zero_default_num_partitions() -> None:
    from sbnotebook import spark as sbspark

    with pytest.raises(OptionError, match="default_num_partitions must be 1 or more, not 0"):
        sbspark.register(
            object(),
            "Endpoint=sb://localhost:1;SharedAccessKeyName=k;SharedAccessKey=x;UseDevelopmentEmulator=true",
            default_num_partitions=0,
        )


@pytest.mark.parametrize("kind", ["read", "stream", "write", "stream write"])
def test_unknown_options_are_refused_naming_the_closest(kind: str) -> None:
    """Every kind refuses what it does not know, in one line, with the closest known name; Spark's
    option keys are case-insensitive (they arrive lower-cased), so the comparison is too."""
    from sbnotebook.spark.options import KNOWN_OPTIONS, check_known

    for name in KNOWN_OPTIONS[kind]:
        check_known({name.lower(): "x", name: "x"}, kind)  # known, in any case
    typo = {"read": "maxMesages", "stream": "maxMessagesPerTriger", "write": "maxInFlite", "stream write": "onePerSnd"}[
        kind
    ]
    meant = {
        "read": "maxMessages",
        "stream": "maxMessagesPerTrigger",
        "write": "maxInFlight",
        "stream write": "onePerSend",
    }
    with pytest.raises(OptionError) as err:
        check_known({"entity": "q", typo.lower(): "10"}, kind)
    assert str(err.value) == f"servicebus: unknown option {typo.lower()!r} for a {kind}: did you mean {meant[kind]}?"
    with pytest.raises(OptionError, match=r"^servicebus: unknown option 'colour' for a .*; known: entity, "):
        check_known({"colour": "red"}, kind)


def test_an_option_of_another_kind_is_refused_as_such(emulator: Emulator) -> None:
    conn = {"connectionString": emulator.connection_string}
    with pytest.raises(
        OptionError, match=r"'maxmessagespertrigger' for a read \(an option of a stream\): did you mean maxMessages\?"
    ):
        parse("read", {"entity": "q", "maxmessagespertrigger": "5", **conn})
    with pytest.raises(OptionError, match=r"unknown option 'enqueuedbefore' for a stream \(an option of a read\)"):
        parse("stream", {"entity": "q", "enqueuedbefore": "2026-01-01", **conn})


def test_a_read_parses_its_entity_once_across_schema_reader_and_stream_reader(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data source's one ReadSpec: schema() (bodyFormat=json: the body schema inferred from a peek
    of the entity), then reader() and streamReader() on the data source pickled as Spark hands it from
    one Python worker to the next, parse the entity once (5 times before the spec: once to infer the
    body schema, twice in each of the read and the stream options); its existence is checked through core."""
    from sbnotebook.spark.source import ServiceBusDataSource

    core.send("q", ['{"id": 1}'], connection=emulator.connection_string)
    parsed = counted_parses(monkeypatch)
    source = ServiceBusDataSource({"entity": "q", "connectionString": emulator.connection_string, "bodyFormat": "json"})
    schema = source.schema()
    assert [f.name for f in schema.fields][-2:] == ["body_json", "_rescued_body"]
    reader = pickle.loads(pickle.dumps(source)).reader(schema)
    stream = pickle.loads(pickle.dumps(source)).streamReader(schema)
    assert (reader.options.entity, stream.options.entity) == (EntityPath("q"), EntityPath("q"))
    assert (reader.body.format, stream.body.format) == ("json", "json")
    assert sum(parsed.values()) == 1, parsed
    missing = ServiceBusDataSource({"entity": "nosuch", "connectionString": emulator.connection_string})
    with pytest.raises(OptionError, match=r"^servicebus: entity not found: nosuch$"):
        missing.reader(missing.schema())


def test_the_websockets_option_reaches_every_kind_of_source(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """websockets=true: the settings each Spark process resolves dial AMQP over WebSockets, whether
    they come from connectionString, a secretRef read there, or what register() passed (what such
    settings do is tests/core/connections/test_websockets.py's)."""
    from sbnotebook.core import resolve
    from sbnotebook.spark.secrets import SecretRef

    given = {"entity": "q", "connectionString": emulator.connection_string, "websockets": "true"}
    parsed = parse("read", given)
    assert parsed.connection.websockets and parsed.conn().websockets
    assert not parse("read", {**given, "websockets": "false"}).conn().websockets
    monkeypatch.setenv("SB_TEST_CONNECTION", emulator.connection_string)
    ref = parse("stream", {"entity": "q", "secretRef": "env:SB_TEST_CONNECTION", "websockets": "TRUE"})
    assert ref.connection == SecretRef("env:SB_TEST_CONNECTION", websockets=True) and ref.conn().websockets
    default = resolve(emulator.connection_string)
    assert ReadSpec({"entity": "q", "websockets": "true"}, 2, default).read().conn().websockets
    with pytest.raises(OptionError, match=r"option websockets must be true or false, not 'yes'\."):
        parse("read", {**given, "websockets": "yes"})


def test_one_per_send_is_true_or_false_as_every_boolean_option_is(emulator: Emulator) -> None:
    """A write's onePerSend option (the old `batch`, its opposite) is read as websockets is: true or
    false, anything else refused (a '0' or a misspelt 'flase' batched the sends before, silently)."""
    from pyspark.sql.types import StringType, StructField, StructType

    from sbnotebook.spark.spec import WriteOptions

    schema = StructType([StructField("body", StringType())])
    given = {"entity": "q", "connectionString": emulator.connection_string}
    assert WriteOptions.parse(given, schema).one_per_send is False
    assert WriteOptions.parse({**given, "onePerSend": "True"}, schema).one_per_send is True
    with pytest.warns(FutureWarning, match="onePerSend=true"):
        assert WriteOptions.parse({**given, "batch": "False"}, schema).one_per_send is True  # the old name, turned
    for bad in ("0", "no", "flase"):
        with pytest.raises(OptionError, match="option onePerSend must be true or false"):
            WriteOptions.parse({**given, "onePerSend": bad}, schema)
