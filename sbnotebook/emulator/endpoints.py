"""Where an emulator is and how clients address it: the host it advertises, the key it takes, its
connection string, its TLS certificate and Entra tenant, its topology."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import tempfile
import uuid
from pathlib import Path
from typing import Any

from .security.sas import DEFAULT_KEY
from .security.tls import ServerCertificate, local_ca
from .topology import Topology, default_topology


def server_certificate(
    cert: str | Path | None, key: str | Path | None, tls_dir: str | Path | None, data_dir: str | Path | None
) -> ServerCertificate:
    if (cert is None) != (key is None):
        raise ValueError("give both a TLS certificate and its key, or neither (a local CA is made)")
    if cert is not None and key is not None:
        return ServerCertificate(Path(cert), Path(key), None)
    if tls_dir is None:
        tls_dir = Path(data_dir) / "tls" if data_dir is not None else tempfile.mkdtemp(prefix="sbnotebook-tls-")
    return local_ca(Path(tls_dir))


def tenant_id(certificate: ServerCertificate) -> str:
    """The tenant id kept beside the local CA (stable across runs, as the CA is); a new one when
    the certificate is the user's own."""
    if certificate.ca_file is None:
        return str(uuid.uuid4())
    path = certificate.ca_file.parent / "tenant"
    try:
        text = path.read_text(encoding="ascii").strip()
        return str(uuid.UUID(text))
    except (OSError, ValueError):
        tenant = str(uuid.uuid4())
        path.write_text(tenant + "\n", encoding="ascii")
        return tenant


def load_topology(config: str | Path | dict[str, Any] | Topology | None) -> Topology:
    if config is None:
        return default_topology()
    if isinstance(config, Topology):
        return config
    if isinstance(config, dict):
        return Topology.from_dict(config)
    return Topology.from_file(config)


def is_loopback(host: str) -> bool:
    """Only this machine can reach an interface named so (a host name other than localhost may be any)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def advertised_host(host: str) -> str:
    """An address clients can dial: a wildcard bind (0.0.0.0, ::) is this machine's name."""
    return socket.gethostname() if host in ("", "0.0.0.0", "::") else host


def choose_key(host: str, key: str | None) -> str:
    """The published default key on loopback only; a random one elsewhere unless a key is given."""
    if key is None:
        return DEFAULT_KEY if is_loopback(host) else secrets.token_urlsafe(32)
    if key == DEFAULT_KEY and not is_loopback(host):
        raise ValueError(
            f"the published default key is refused on {host}, which other machines reach: "
            "give a key of your own (--key-file) or omit it for a random one"
        )
    return key


def connection_string(
    host: str, port: int, key_name: str, key: str, *, tls: bool = False, entity: str | None = None
) -> str:
    """Over TLS the SDK's production path (no ``UseDevelopmentEmulator``, which means plain AMQP).
    ``entity``: the ``EntityPath`` of a connection string for an entity's own policy."""
    base = f"Endpoint=sb://{host}:{port};SharedAccessKeyName={key_name};SharedAccessKey={key}"
    if entity is not None:
        base += f";EntityPath={entity}"
    return base if tls else f"{base};UseDevelopmentEmulator=true"
