"""`sbnotebook emulator` / `python -m sbnotebook.emulator` as a user runs them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import QuickCloseClient, drain, send
from tests.processes import free_port, run_cli_emulator, start_cli_emulator

CONN = re.compile(
    r"^Endpoint=sb://127\.0\.0\.1:(\d+);SharedAccessKeyName=RootManageSharedAccessKey;"
    r"SharedAccessKey=(\S+);UseDevelopmentEmulator=true$"
)


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    return start_cli_emulator("--port", "0", *args, pattern=CONN)  # the exact format is part of the contract


def test_prints_connection_string_serves_and_stops_on_sigterm() -> None:
    proc, conn = _start()
    try:
        with QuickCloseClient.from_connection_string(conn) as c:
            send(c, "orders", "via-cli")
            assert [str(m) for m in drain(c, "orders")] == ["via-cli"]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert "stopped" in out
    finally:
        proc.kill()


def test_sigint_stops_cleanly_and_custom_key_and_config(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps({"UserConfig": {"Namespaces": [{"Name": "n", "Queues": [{"Name": "mine"}]}]}}))
    proc, conn = _start("--config", str(config), "--key", "k3y", "--admin-port", "0")
    try:
        assert CONN.match(conn) and CONN.match(conn).group(2) == "k3y"  # type: ignore[union-attr]
        with QuickCloseClient.from_connection_string(conn) as c:
            send(c, "mine", "custom")
            assert [str(m) for m in drain(c, "mine")] == ["custom"]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=15)
        assert proc.returncode == 0
    finally:
        proc.kill()


def test_bad_config_exits_2_with_a_reason(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(
        json.dumps({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"Nope": 1}}]}]}})
    )
    result = run_cli_emulator("emulator", "--port", "0", "--config", str(config), module="sbnotebook")
    assert result.returncode == 2
    assert "unknown property 'Nope'" in result.stderr


def test_admin_api_on_the_amqp_port_and_on_amqp_port_plus_one() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbnotebook.emulator", "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert any(
            f"Administration API on http://127.0.0.1:{port} (the AMQP port) and http://127.0.0.1:{port + 1}" in line
            for line in lines
        ), lines
    finally:
        proc.terminate()
        proc.wait(15)


def test_prints_the_connection_string_of_each_policy_before_its_own(tmp_path: Path) -> None:
    """A topology's shared access policies (AuthorizationRules) come with their connection strings,
    entity-scoped (EntityPath); the last line is still the root connection string."""
    config = tmp_path / "Config.json"
    rules = [{"KeyName": "reader", "Rights": ["Listen"], "PrimaryKey": "r3ad"}]
    queue = {"Name": "mine", "AuthorizationRules": rules}
    config.write_text(json.dumps({"UserConfig": {"Namespaces": [{"Name": "n", "Queues": [queue]}]}}))
    line = re.compile(r"^Policy 'reader' of mine \(Listen\): (Endpoint=\S+)$")
    proc, printed = start_cli_emulator("--port", "0", "--config", str(config), pattern=line)
    try:
        match = line.match(printed)
        assert match is not None
        conn = match.group(1)
        assert "SharedAccessKeyName=reader;SharedAccessKey=r3ad;EntityPath=mine;UseDevelopmentEmulator=true" in conn
        assert proc.stdout is not None and CONN.match(proc.stdout.readline().strip())
        with QuickCloseClient.from_connection_string(conn) as c, c.get_queue_receiver("mine") as r:
            assert r.peek_messages(max_message_count=1, sequence_number=1) == []
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    finally:
        proc.kill()
