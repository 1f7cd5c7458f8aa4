"""The Spark source with fullyQualifiedNamespace over the TLS emulator with Entra ID: each executor
signs in with DefaultAzureCredential from its environment (a service principal, AZURE_AUTHORITY_HOST)
and trusts the CA named by SBNOTEBOOK_CA_BUNDLE there. Executors get their environment the way a
cluster gives it (``spark.executorEnv.*``; on Databricks the cluster's environment variables), not
from the notebook's process."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from sbnotebook import core
from sbnotebook.core.connections.connection import from_namespace
from sbnotebook.emulator import Emulator
from tests.conftest import stop_local_spark

pytestmark = pytest.mark.slow

PRINCIPAL = ("spark-app", "spark-secret")


@pytest.fixture(scope="module")
def entra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    principals = [f"{PRINCIPAL[0]}:{PRINCIPAL[1]}:Owner", "spark-sender:sender-secret:Sender"]
    with Emulator(tls=True, tls_dir=tmp_path_factory.mktemp("tls"), principals=principals) as emu:
        yield emu


def _environment(emu: Emulator, client_id: str, secret: str) -> dict[str, str]:
    assert emu.tenant is not None and emu.entra_authority is not None
    return {
        "AZURE_TENANT_ID": emu.tenant,
        "AZURE_CLIENT_ID": client_id,
        "AZURE_CLIENT_SECRET": secret,
        "AZURE_AUTHORITY_HOST": emu.entra_authority,
        "SBNOTEBOOK_CA_BUNDLE": str(emu.ca_file),
    }


@pytest.fixture(scope="module")
def spark(entra: Emulator) -> Iterator[Any]:
    """A local session whose executors have the service principal in their environment, and the
    notebook's process too (for the driver-side planning and the checks below)."""
    from pyspark.sql import SparkSession

    from sbnotebook import spark as sbspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    stop_local_spark()  # getOrCreate would hand back an earlier module's shared session, without executorEnv
    env = _environment(entra, *PRINCIPAL)
    builder = SparkSession.builder.master("local[2]").appName("sbnotebook-test_spark_entra")
    for name, value in env.items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    session = builder.config("spark.log.level", "ERROR").getOrCreate()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        sbspark.register(session, from_namespace(f"localhost:{entra.port}"), default_num_partitions=2)
        yield session
    session.stop()
    core.close_all()


def _read(spark: Any, emu: Emulator, entity: str) -> Any:
    return (
        spark.read.format("servicebus")
        .option("fullyQualifiedNamespace", f"localhost:{emu.port}")
        .option("entity", entity)
        .load()
    )


def test_read_and_write_with_fully_qualified_namespace_and_entra_id(spark: Any, entra: Emulator) -> None:
    with core.connect(
        fully_qualified_namespace=f"localhost:{entra.port}", credential=entra.credential(["Owner"])
    ) as conn:
        core.send("orders", [f"e{i}" for i in range(20)], connection=conn)
    bodies = {r.body_text for r in _read(spark, entra, "orders").select("body_text").collect()}
    assert {f"e{i}" for i in range(20)} <= bodies
    frame = spark.createDataFrame([(f"w{i}",) for i in range(5)], "body string")
    (
        frame.write.format("servicebus")
        .mode("append")
        .option("fullyQualifiedNamespace", f"localhost:{entra.port}")
        .option("entity", "orders")
        .save()
    )
    again = {r.body_text for r in _read(spark, entra, "orders").select("body_text").collect()}
    assert {f"w{i}" for i in range(5)} <= again


def test_the_secret_and_the_token_stay_out_of_the_plan(
    spark: Any, entra: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    _read(spark, entra, "orders").explain(True)
    plan = capsys.readouterr().out
    assert "servicebus" in plan.lower() or "BatchScan" in plan
    assert PRINCIPAL[1] not in plan and "eyJ" not in plan  # no client secret, no JWT


def test_a_principal_without_the_role_gets_one_line_naming_it(spark: Any, entra: Emulator) -> None:
    """Executors signed in as a Data Sender: the read is refused with the kit's one line naming the
    role it needs (runs last: it replaces the module's session with one for that principal)."""
    from pyspark.sql import SparkSession

    from sbnotebook import spark as sbspark

    spark.stop()
    env = _environment(entra, "spark-sender", "sender-secret")
    builder = SparkSession.builder.master("local[1]").appName("sbnotebook-test_spark_entra-sender")
    for name, value in env.items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    session = builder.config("spark.log.level", "ERROR").getOrCreate()
    try:
        sbspark.register(session, from_namespace(f"localhost:{entra.port}"), default_num_partitions=1)
        with pytest.raises(Exception) as refused:
            _read(session, entra, "orders").collect()
        text = str(refused.value)
        lines = [line for line in text.splitlines() if "Access refused" in line]
        assert lines, text[-2000:]
        assert "Azure Service Bus Data Receiver" in lines[-1]
        assert "sender-secret" not in text
    finally:
        session.stop()
