"""A port to run an emulator on that can be restarted on the same port.

``--port 0`` is right for an emulator that lives once. One that is killed and restarted on the
same port (durability demos, soaks, tests) needs a port nobody else will take in between. A port
from the kernel's ephemeral range can be handed to any process's outgoing connection the moment
the broker dies, and the restart then fails with "address in use" for as long as that connection
lives. So pick below that range, where only explicit binds land, and check the port after it
(the CLI's default extra administration port, ``--port`` + 1) is free as well.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

AMQP_PORT = 5672
"""AMQP's own port: where ``sbnotebook emulator`` listens unless told otherwise, and the port of an
endpoint that names none."""

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # clear of well-known and registered services most machines run


def _ephemeral_start() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; other systems use 49152 and up, which this also avoids


def _free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def restartable_port(host: str = "127.0.0.1", *, attempts: int = 200) -> int:
    """A free port below the ephemeral range whose next port is free too."""
    top = _ephemeral_start() - 2
    if top <= _LOWEST:
        raise RuntimeError(f"no port range below the ephemeral ports (they start at {top + 2})")
    rng = random.SystemRandom()  # independent of any seeded random a caller uses
    for _ in range(attempts):
        port = rng.randrange(_LOWEST, top)
        if _free(host, port) and _free(host, port + 1):
            return port
    raise RuntimeError(f"no free pair of ports found below {top + 2} after {attempts} tries")
