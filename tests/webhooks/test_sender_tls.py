"""https attempts against a real TLS receiver on loopback with two host names on one address:
connections are kept alive per host name, and a connection made for one name never carries a
request for the other (each gets its own TLS handshake, with its own SNI)."""

import datetime
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.webhooks.resolver import resolver
from services.webhooks.sender import Sender

NAMES = ("alpha.test", "beta.test")
BODY = '{"id":"psEvnt_1"}'


@dataclass
class TlsReceiver:
    port: int
    ca: Path
    # Per request: (SNI of its connection's handshake, the client's port, the Host header).
    requests: list[tuple[str | None, int, str]] = field(default_factory=list)


def _certificates(work: Path) -> tuple[Path, Path]:
    """A CA and a server certificate for both names; returns (ca.pem, server chain + key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Webhook test CA")])
    validity = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=2))
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(name) for name in NAMES]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAMES[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, chain = work / "ca.pem", work / "server.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain.write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_path, chain


@contextmanager
def tls_receiver(work: Path) -> Iterator[TlsReceiver]:
    ca, chain = _certificates(work)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    server_names: dict[int, str | None] = {}  # the client's port -> SNI of its handshake

    def remember_sni(sock: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> None:
        server_names[sock.getpeername()[1]] = name  # type: ignore[attr-defined]

    context.sni_callback = remember_sni
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    received = TlsReceiver(port=int(server.server_address[1]), ca=ca)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            port = self.client_address[1]
            received.requests.append((server_names.get(port), port, self.headers["Host"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server.RequestHandlerClass = Handler
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


async def test_https_connections_are_kept_alive_per_host_name_only(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 {' '.join(NAMES)}\n")
    with tls_receiver(tmp_path) as receiver:
        trust = ssl.create_default_context(cafile=str(receiver.ca))
        sender = Sender(
            timeout_seconds=5,
            allow_private=True,
            max_connections=4,
            resolver=resolver(hosts),
            trust=trust,
        )
        try:
            for name in (NAMES[0], NAMES[0], NAMES[1], NAMES[1], NAMES[0]):
                url = f"https://{name}:{receiver.port}/hook"
                outcome = await sender.send(url, BODY, {"webhook-id": "whd_1"})
                assert outcome.ok, outcome
        finally:
            await sender.aclose()
    by_port: dict[int, set[str]] = {}
    for sni, port, host in receiver.requests:
        assert sni == host.split(":")[0]  # each request on a connection made for its own name
        by_port.setdefault(port, set()).add(host)
    # One kept-alive connection per name (five requests), never one shared by both names.
    assert len(by_port) == 2
    assert all(len(hosts_seen) == 1 for hosts_seen in by_port.values())
    assert len(receiver.requests) == 5
