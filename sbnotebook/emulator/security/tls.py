"""TLS for the emulator's one port: a local certificate authority and the server's context.

``--tls`` makes (once, under the data folder) a CA and a server certificate for ``localhost``,
``127.0.0.1``, ``::1`` and this machine's name, signed by that CA. Clients trust the CA file
(``connection_verify=ca``), as they would a corporate CA. ``--tls-cert/--tls-key`` give a
certificate of one's own instead.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

CA_FILE = "ca.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"
VALID_DAYS = 825  # the most Apple's and browsers' rules accept for a server certificate


@dataclass(frozen=True)
class ServerCertificate:
    cert_file: Path
    key_file: Path
    ca_file: Path | None  # the CA clients must trust (None: a certificate given by the user)

    def context(self) -> ssl.SSLContext:
        """The server side: TLS 1.2 or later, as Service Bus requires."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def local_ca(directory: Path) -> ServerCertificate:
    """The CA and server certificate under ``directory``, made on first use and reused after."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, cert, key = directory / CA_FILE, directory / CERT_FILE, directory / KEY_FILE
    if not (ca.exists() and cert.exists() and key.exists()):
        _make(ca, cert, key)
    return ServerCertificate(cert, key, ca)


def _make(ca_path: Path, cert_path: Path, key_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # a little slack for clock skew
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sbnotebook emulator local CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    host = socket.gethostname()
    if host and host != "localhost":
        names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    _write_private(
        key_path,
        server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    cert_path.write_bytes(server_cert.public_bytes(pem) + ca_cert.public_bytes(pem))  # the chain
    ca_path.write_bytes(ca_cert.public_bytes(pem))  # last: its presence says the set is complete
    # The CA's own key is not kept: nothing else is ever signed with it.


def _write_private(path: Path, data: bytes) -> None:
    """A key file readable only by its owner (created so, never widened)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
