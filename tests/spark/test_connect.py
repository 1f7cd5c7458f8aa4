"""The `servicebus` data source from a Spark Connect client (what Databricks serverless and shared
clusters run), against a separate Connect server process started with Spark's own
SparkConnectServer. Nothing here may touch sparkContext or read files another process wrote."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.operations.bounds import FANOUT
from sbnotebook.emulator import Emulator
from tests import stand_in_credential as stand_in
from tests.conftest import TEST_TOPOLOGY, stop_local_spark
from tests.helpers import QuickCloseClient, counted_peeks, drain, send, stream_to_parquet
from tests.processes import free_port, port_open, stop_process, wait_for_server
from tests.required import require_module
from tests.spark import bodies_scenarios, snapshot_scenarios
from tests.spark.helpers import logged
from tests.waiting import wait_until

pyspark = require_module("pyspark")
require_module("grpc")  # the pyspark[connect] extra
from sbnotebook import spark as sbspark  # noqa: E402

pytestmark = pytest.mark.slow
SECRET = "connect-test-key-4c1b9e"  # a key that must never reach the server's logs or event log


@contextlib.contextmanager
def connect_server(workdir: Path, extra_env: dict[str, str] | None = None) -> Iterator[tuple[str, Path, Path]]:
    """A Spark Connect server in its own JVM: (remote url, event log dir, server log file). Its event
    log is complete once the block ends (the server flushes it when it stops). ``extra_env`` is the
    server's own environment (on Databricks: the cluster's), which this process does not get."""
    home = Path(pyspark.__file__).parent
    port = free_port()
    events = workdir / "events"
    events.mkdir()
    log = workdir / "server.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(home))
    env.update(extra_env or {})
    cmd = [
        str(home / "bin" / "spark-submit"),
        "--master",
        "local[2]",
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir={events}",
        "--conf",
        "spark.eventLog.compress=false",  # greppable
        "--conf",
        "spark.python.worker.faulthandler.enabled=true",
        "--name",
        "sbnotebook-connect-tests",
        "spark-internal",
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_server(proc, lambda: port_open(port), "the Connect server", log, timeout=120)
        yield f"sc://127.0.0.1:{port}", events, log
    finally:
        stop_process(proc, timeout=30)


SECRET_REF = "SBNOTEBOOK_TEST_CONNECT_SB"  # the server's variable holding a connection string (env:NAME)
CREDENTIAL_KEY = "connect-credential-key-61e0b3"  # the stand-in issuer's key, in the server's environment only
CLIENT_ID, CLIENT_SECRET = "connect-entra-app", "connect-entra-secret-93c7d1"  # a principal's, the same


@dataclass
class Server:
    """The module's one Connect server, and the namespaces whose credentials its environment holds
    (on Databricks: the cluster's; this process never has them). One server, not one per test that
    needs an environment: each start took 10 s of CPU and more. Each test reads only the part of the
    logs written while it ran (``mark``, ``since``); the whole of them, complete once the server
    stops, is read again at the end of the module for every key."""

    url: str
    events: Path
    log: Path
    by_env: Emulator  # key SECRET, its connection string under SECRET_REF
    by_key: Emulator  # TLS, key CREDENTIAL_KEY: the stand-in issuer signs with it
    by_entra: Emulator  # TLS (the same CA), the principal CLIENT_ID
    env: dict[str, str]  # what the server's environment has that this process has not

    def mark(self) -> dict[Path, int]:
        """How much of each log file is written now."""
        return {p: p.stat().st_size for p in [*self.events.rglob("*"), self.log] if p.is_file()}

    def since(self, mark: dict[Path, int], spark: Any) -> list[bytes]:
        """What each log file got after ``mark``, up to a query run now on ``spark`` and seen in the
        event log: its listener writes events in order and flushes at each query, so what the test
        did before is on disk."""
        token = f"flushed-{uuid.uuid4().hex}"
        spark.range(1).selectExpr(f"'{token}' AS marker").collect()
        wait_until(lambda: any(token.encode() in t for t in logged(self.events)), timeout=60, interval=0.2)
        out = []
        for path in [*self.events.rglob("*"), self.log]:
            if path.is_file():
                with open(path, "rb") as f:
                    f.seek(mark.get(path, 0))
                    out.append(f.read())
        return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    stop_local_spark()  # a Connect client's process has no classic session (an earlier module's shared one)
    work = tmp_path_factory.mktemp("connect")
    tls = work / "tls"  # one CA for both TLS namespaces: the server trusts one bundle
    root = str(Path(__file__).resolve().parents[2])  # the references import tests.stand_in_credential
    with (
        Emulator(TEST_TOPOLOGY, key=SECRET) as by_env,
        Emulator(TEST_TOPOLOGY, key=CREDENTIAL_KEY, tls=True, tls_dir=tls) as by_key,
        Emulator(TEST_TOPOLOGY, tls=True, tls_dir=tls, principals=[f"{CLIENT_ID}:{CLIENT_SECRET}:Owner"]) as by_entra,
    ):
        assert by_entra.tenant is not None and by_entra.entra_authority is not None
        assert by_key.ca_file == by_entra.ca_file
        env = {
            SECRET_REF: by_env.connection_string,
            stand_in.KEY: CREDENTIAL_KEY,
            "SBNOTEBOOK_CA_BUNDLE": str(by_key.ca_file),
            "AZURE_TENANT_ID": by_entra.tenant,
            "AZURE_CLIENT_ID": CLIENT_ID,
            "AZURE_CLIENT_SECRET": CLIENT_SECRET,
            "AZURE_AUTHORITY_HOST": by_entra.entra_authority,
            "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        }
        assert not (set(env) - {"PYTHONPATH"}) & set(os.environ)  # only the server has them
        with connect_server(work, env) as (url, events, log):
            yield Server(url, events, log, by_env, by_key, by_entra, env)
        core.close_all()
    texts = logged(events, log)  # complete: the server has stopped
    leaks = (SECRET, CREDENTIAL_KEY, CLIENT_SECRET, "eyJ", "SharedAccessSignature")  # keys, a JWT, a SAS
    assert not [s for s in leaks for t in texts if s.encode() in t], "a key in the Connect server's logs"


@contextlib.contextmanager
def connect_mode_env() -> Iterator[None]:
    """A remote session marks the process as Connect-only (SPARK_CONNECT_MODE_ENABLED, SPARK_REMOTE);
    undo that afterwards, or every later classic session (and notebook kernel) becomes Connect."""
    saved = {k: os.environ.get(k) for k in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def remote(server: Server) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    with connect_mode_env():
        session = SparkSession.builder.remote(server.url).getOrCreate()
        assert type(session).__module__.startswith("pyspark.sql.connect")
        yield session
        session.stop()


@pytest.fixture
def keyed() -> Iterator[Emulator]:
    """An emulator with a key of its own, so a leak is findable by grep."""
    with Emulator(TEST_TOPOLOGY, key=SECRET) as emu:
        yield emu
        core.close_all()


@pytest.fixture
def sp(remote: Any, keyed: Emulator) -> Any:
    return sbspark.register(remote, keyed.connection_string)


def test_read_peek_write_and_settle_over_connect(sp: Any, keyed: Emulator) -> None:
    cs = keyed.connection_string
    with QuickCloseClient.from_connection_string(cs) as client:
        send(client, "q", *[f"m{i}" for i in range(120)])
        df = sp.read.format("servicebus").option("entity", "q").load()
        assert df.count() == 120
        assert len(core.peek("q", max_messages=500, connection=cs)) == 120  # peeking took nothing

        deferred = (
            sp.read.format("servicebus").option("entity", "q").option("mode", "defer").option("maxMessages", 30).load()
        ).cache()
        assert deferred.count() == 30
        report = sbspark.settle(deferred, "complete")
        assert report.count("completed") == 30 and report.ok

        written = sbspark.write(sp.createDataFrame([("a",), ("b",)], "body string"), "once")
        assert written.count("sent") == 2 and written.ok
        assert sorted(str(m) for m in drain(client, "once")) == ["a", "b"]
        assert len(drain(client, "q")) == 90


def test_receive_and_delete_takes_exactly_what_it_returns(sp: Any, keyed: Emulator) -> None:
    with QuickCloseClient.from_connection_string(keyed.connection_string) as client:
        send(client, "q", *[f"m{i}" for i in range(300)])
        df = (
            sp.read.format("servicebus")
            .option("entity", "q")
            .option("mode", "receive_and_delete")
            .option("maxMessages", 100)
            .option("numPartitions", 2)
            .load()
        )
        rows = df.select("body_text").collect()
        assert len(rows) == 100
        assert len(drain(client, "q", wait=0.5)) == 200  # nothing taken beyond the rows returned


def test_the_key_never_reaches_the_server_or_its_logs(server: Server) -> None:
    """register() keeps the key out of options, plans, the server log and the event log. As a control,
    a key given the way the docs advise against (the connectionString option) is found by the same grep."""
    from pyspark.sql import SparkSession

    control = "control-key-7d02aa"
    mark = server.mark()
    with (
        Emulator(TEST_TOPOLOGY, key=SECRET) as kept,
        Emulator(TEST_TOPOLOGY, key=control) as leaked,
        connect_mode_env(),
    ):
        spark = SparkSession.builder.remote(
            server.url
        ).create()  # not getOrCreate: that may hand back another server's session
        try:
            with QuickCloseClient.from_connection_string(kept.connection_string) as client:
                send(client, "q", "x")
            sbspark.register(spark, kept.connection_string)
            df = spark.read.format("servicebus").option("entity", "q").load()
            assert df.count() == 1
            plans = [df._explain_string(extended=True)] if hasattr(df, "_explain_string") else []
            assert sbspark.write(spark.createDataFrame([("a",)], "body string"), "once").ok
            by_option = spark.read.format("servicebus").option("entity", "q")
            assert by_option.option("connectionString", leaked.connection_string).load().count() == 0
            texts = server.since(mark, spark)
        finally:
            spark.stop()
            core.close_all()
    assert any(control.encode() in t for t in texts), "the grep would not see a leak"
    assert all(SECRET.encode() not in t for t in texts + [p.encode() for p in plans])


def test_a_stream_to_parquet_over_connect_with_only_a_secret_reference(server: Server, tmp_path: Path) -> None:
    """The documented way on serverless: the connection string lives in the server's environment and
    the notebook names it (env:NAME). A stream from a queue to Parquet runs on the server, completes
    every message after its batch committed, and the key reaches no log."""
    from pyspark.sql import SparkSession

    name, emu = SECRET_REF, server.by_env
    assert name not in os.environ  # only the server has it
    mark = server.mark()
    with connect_mode_env():
        spark = SparkSession.builder.remote(server.url).create()
        try:
            with QuickCloseClient.from_connection_string(emu.connection_string) as client:
                send(client, "q", *[f"m{i}" for i in range(25)])
                sbspark.register(spark, f"env:{name}")  # the stream's connection
                rows = spark.read.format("servicebus").option("entity", "q").option("secretRef", f"env:{name}").load()
                assert rows.count() == 25  # planned and read on the server, resolved there
                sink = stream_to_parquet(spark, tmp_path, entity="q", maxMessagesPerTrigger=10)
                written = sorted(r.body_text for r in sink.collect())
                assert written == sorted(f"m{i}" for i in range(25))
                # Every batch completed after its commit (AvailableNow asks once more at the end).
                assert len(core.peek("q", max_messages=100, connection=emu.connection_string)) == 0
            texts = server.since(mark, spark)
        finally:
            spark.stop()
            core.close_all()
    assert any(name.encode() in t for t in texts)  # the secretRef option is logged: the grep reads these files
    assert all(SECRET.encode() not in t for t in texts)


def write_read_and_stream_by_reference(
    server: Server, tmp_path: Path, by_ref: dict[str, str], prefix: str, count: int, per_trigger: int
) -> tuple[list[str], list[bytes]]:
    """On a new session of the Connect server, given only a namespace and a credential reference
    (``by_ref``): ``count`` rows (``prefix0``, ``prefix1``, ...) written to q, read back, and streamed
    to Parquet ``per_trigger`` at a time, each message completed after its batch's commit. Returns the
    read's plans and what the server logged meanwhile (for the leak grep)."""
    from pyspark.sql import SparkSession

    mark = server.mark()
    with connect_mode_env():
        spark = SparkSession.builder.remote(server.url).create()
        try:
            # The format needs registering on a Connect session; given only the same reference
            # (the stream below uses it), while the batch write and read name it in their options.
            sbspark.register(
                spark, fully_qualified_namespace=by_ref["fullyQualifiedNamespace"], credential=by_ref["credentialRef"]
            )
            rows = spark.range(count).selectExpr(f"concat('{prefix}', id) as body").repartition(2)
            rows.write.format("servicebus").mode("append").options(entity="q", **by_ref).save()
            df = spark.read.format("servicebus").options(entity="q", **by_ref).load()
            assert sorted(r.body_text for r in df.collect()) == sorted(f"{prefix}{i}" for i in range(count))
            plans = [df._explain_string(extended=True)] if hasattr(df, "_explain_string") else []
            assert stream_to_parquet(spark, tmp_path, entity="q", maxMessagesPerTrigger=per_trigger).count() == count
            return plans, server.since(mark, spark)
        finally:
            spark.stop()


def test_a_credential_reference_alone_reads_writes_and_streams_over_connect(server: Server, tmp_path: Path) -> None:
    """Serverless' way in: no key anywhere near the notebook, only the namespace and a credential
    reference (on Databricks `service-credential:NAME`, a Unity Catalog service credential; here the plug
    point `callable:...`). The Connect server and its executors make the credential themselves; the
    client has neither the issuer's key nor the CA. A batch write, a batch read and a stream to
    Parquet run, every message is completed after its batch's commit, and no log holds the key or a token."""
    key, emu = CREDENTIAL_KEY, server.by_key
    assert stand_in.KEY not in os.environ and "SBNOTEBOOK_CA_BUNDLE" not in os.environ  # only the server has them
    by_ref = {"fullyQualifiedNamespace": f"localhost:{emu.port}", "credentialRef": stand_in.REF}
    plans, texts = write_read_and_stream_by_reference(server, tmp_path, by_ref, "c", count=40, per_trigger=15)
    try:
        os.environ["SBNOTEBOOK_CA_BUNDLE"] = str(emu.ca_file)
        with core.connect(emu.connection_string, warm=False) as conn:  # with the key, from here
            assert len(core.peek("q", max_messages=100, connection=conn)) == 0
    finally:
        os.environ.pop("SBNOTEBOOK_CA_BUNDLE", None)
        core.close_all()
    assert any(stand_in.REF.encode() in t for t in texts)  # the options are logged: the grep reads these files
    assert all(key.encode() not in t and b"SharedAccessSignature" not in t for t in texts + [p.encode() for p in plans])


def test_entra_id_by_credential_reference_alone_over_connect(server: Server, tmp_path: Path) -> None:
    """Serverless with Entra ID: the notebook gives only the namespace and a credential reference;
    the Connect server and its executors sign in as a service principal from their own environment
    (azure-identity's ClientSecretCredential, a JWT from the TLS emulator's issuer, checked by the
    broker). No key or connection string of this namespace exists on the server or the client (the
    server's environment holds other namespaces' keys: the other tests'). A batch write, a batch
    read and a stream to Parquet run; the queue, read afterwards with another principal, is empty, and
    no log or plan holds the client secret or a token."""
    emu = server.by_entra
    assert emu.tenant is not None and emu.entra_authority is not None
    assert not (set(server.env) - {"PYTHONPATH"}) & set(os.environ)  # only the server has them
    assert stand_in.KEY not in os.environ  # and no stand-in issuer's key here
    own = dict(part.split("=", 1) for part in emu.connection_string.split(";") if part)["SharedAccessKey"]
    assert not [name for name, value in server.env.items() if own in value]  # nor this namespace's key there
    by_ref = {"fullyQualifiedNamespace": f"localhost:{emu.port}", "credentialRef": stand_in.ENTRA_REF}
    plans, texts = write_read_and_stream_by_reference(server, tmp_path, by_ref, "e", count=30, per_trigger=12)
    try:
        os.environ["SBNOTEBOOK_CA_BUNDLE"] = str(emu.ca_file)
        with core.connect(
            fully_qualified_namespace=by_ref["fullyQualifiedNamespace"], credential=emu.credential(["Owner"])
        ) as conn:
            assert len(core.peek("q", max_messages=100, connection=conn)) == 0  # every message completed
    finally:
        os.environ.pop("SBNOTEBOOK_CA_BUNDLE", None)
        core.close_all()
    assert any(stand_in.ENTRA_REF.encode() in t for t in texts)  # the options are logged: the grep reads these
    leaks = (CLIENT_SECRET.encode(), b"eyJ", b"SharedAccessSignature")  # the client secret, a JWT, a SAS
    assert not [s for s in leaks for t in texts + [p.encode() for p in plans] if s in t]


def test_json_bodies_inferred_pinned_rescued_and_written_over_connect(sp: Any, keyed: Emulator) -> None:
    with QuickCloseClient.from_connection_string(keyed.connection_string) as client:
        bodies_scenarios.batch_read_infer_pin_rescue_and_write(sp, client)


def test_a_json_stream_restarts_with_its_recorded_body_schema_over_connect(
    sp: Any, keyed: Emulator, tmp_path: Path
) -> None:
    with QuickCloseClient.from_connection_string(keyed.connection_string) as client:
        bodies_scenarios.stream_restart_keeps_the_recorded_schema(sp, client, tmp_path)


def test_a_peek_read_takes_only_what_was_there_at_planning_over_connect(sp: Any, keyed: Emulator) -> None:
    from sbnotebook.core import resolve

    cs = keyed.connection_string
    with QuickCloseClient.from_connection_string(cs) as client:
        snapshot_scenarios.read_takes_only_what_was_there_at_planning(sp, client, resolve(cs), cs)


def test_a_job_that_writes_back_to_the_entity_it_reads_over_connect(sp: Any, keyed: Emulator) -> None:
    with QuickCloseClient.from_connection_string(keyed.connection_string) as client:
        snapshot_scenarios.read_then_write_back_to_the_same_entity(sp, client)


@pytest.mark.skipif(
    not hasattr(pyspark.sql.datasource.DataSourceReader, "pushFilters"),
    reason="filter pushdown for Python data sources needs pyspark 4.1+",
)
def test_filters_are_pushed_down_over_connect(sp: Any, keyed: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """pushFilters over Spark Connect: the conf set from the client, the filters pushed on the server,
    the read peeks only the window's pages (counted at the broker); with the conf off the client gets
    Spark's error naming it."""
    from pyspark.sql import functions as F

    from tests.spark import test_pushdown as pd

    sp.conf.set(pd.CONF, "true")
    try:
        with QuickCloseClient.from_connection_string(keyed.connection_string) as client:
            for g in range(4):
                send(client, "q", *[f"g{g}-{i}" for i in range(500)])
                time.sleep(0.05)
            state = pd.broker(client)
        t2, t3 = pd.time_of(state, "g2-0"), pd.time_of(state, "g3-0")
        peeks = counted_peeks(keyed, monkeypatch)
        df = pd.load(sp, numPartitions=4).where((F.col("enqueued_time") >= t2) & (F.col("enqueued_time") < t3))
        assert pd.bodies(df) == pd.where(state, lambda s, t: t2 <= t < t3) == sorted(f"g2-{i}" for i in range(500))
        pages = [start for start, count in peeks if count >= 100]  # the read's pages; planning peeks 1 to 32
        assert pages and all(1001 <= start <= 1500 for start in pages), peeks
        assert len(peeks) - len(pages) <= 2 + 2 * (3 * FANOUT + 1), peeks  # as test_pushdown's planning
        # As on classic (docs/spark.md): the server keeps a pushed-down plan with the loaded DataFrame.
        df = pd.load(sp)
        assert df.where(F.col("enqueued_time") >= t3).count() == 500
        if pyspark.__version__.startswith("4.3."):  # checked there (docs/spark.md)
            assert df.count() == 500  # the window leaked into a query without filters
        assert pd.load(sp).count() == 2000
        sp.conf.set(pd.CONF, "false")
        with pytest.raises(Exception, match=f"DATA_SOURCE_PUSHDOWN_DISABLED.*'{pd.CONF}'"):
            pd.load(sp).where(F.col("enqueued_time") >= t2).count()
    finally:
        sp.conf.unset(pd.CONF)
