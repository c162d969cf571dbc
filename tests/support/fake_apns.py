"""A local APNs for tests: HTTP/2 over TLS on 127.0.0.1, built on h2, in a thread of its own.

Like Apple's server it requires a TLS client certificate, here one that chains to the given
root (the development identity's root CA), and it refuses a push whose `apns-topic` is not the
pass type identifier in the certificate's UID. Made with `client_certificate=False` it stands in
for token authentication instead: no certificate, but an `authorization: bearer` header.
It records every push, answers 200 with an `apns-id`, and can be told to answer a token
otherwise (`answer(token, 410, "Unregistered")`). Its own server certificate comes from a
throwaway CA written to `server_ca_path`, which the events service is told to trust
(TESSERA_EVENTS_APNS_CA_PATH).
"""

import asyncio
import datetime
import ipaddress
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import h2.config
import h2.connection
import h2.events
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shared.apple_identity import ensure_dev_identity
from tests.support.stack import Stack, new_stack


@dataclass(frozen=True)
class Push:
    token: str
    method: str
    headers: dict[str, str]
    body: bytes
    client_uid: str | None  # the pass type identifier of the client certificate
    status: int  # what the fake answered


class FakeApns:
    def __init__(self, client_root_ca: Path, work_dir: Path, client_certificate: bool = True):
        self.server_ca_path = work_dir / "fake-apns-ca.pem"
        self._tls = _server_tls(client_root_ca, work_dir, self.server_ca_path, client_certificate)
        self._lock = threading.Lock()
        self._pushes: list[Push] = []
        self._answers: dict[str, tuple[int, str]] = {}
        self._times: dict[str, int] = {}  # tokens answered so only this many more times
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def answer(self, token: str, status: int, reason: str, times: int | None = None) -> None:
        """Answer every push to `token` with this status and APNs reason (only the next
        `times` pushes, then 200)."""
        with self._lock:
            self._answers[token] = (status, reason)
            if times is not None:
                self._times[token] = times

    def pushes(self, token: str | None = None) -> list[Push]:
        with self._lock:
            return [push for push in self._pushes if token is None or push.token == token]

    def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, uid: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        token = path.removeprefix("/3/device/")
        with self._lock:
            status, reason = self._answers.get(token, (200, ""))
            if token in self._times:
                self._times[token] -= 1
                if self._times[token] <= 0:
                    del self._times[token], self._answers[token]
        if method != "POST" or not path.startswith("/3/device/") or not token:
            status, reason = 405 if method != "POST" else 404, "BadPath"
        elif headers.get("apns-topic") is None:
            status, reason = 400, "MissingTopic"
        elif uid is None and not headers.get("authorization", "").startswith("bearer "):
            status, reason = 403, "MissingProviderToken"
        elif uid is not None and headers["apns-topic"] != uid:
            status, reason = 400, "TopicDisallowed"
        with self._lock:
            self._pushes.append(Push(token, method, headers, body, uid, status))
        answer_headers = {"apns-id": str(uuid.uuid4()).upper()}
        if status == 200:
            return 200, answer_headers, b""
        payload: dict[str, object] = {"reason": reason}
        if status == 410:
            payload["timestamp"] = int(time.time() * 1000)
        return status, answer_headers, json.dumps(payload).encode()


class _Http2(asyncio.Protocol):
    def __init__(self, fake: FakeApns):
        self._fake = fake
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self._requests: dict[int, tuple[dict[str, str], bytearray]] = {}
        self._uid: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        der = transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        if der:
            subject = x509.load_der_x509_certificate(der).subject
            uids = subject.get_attributes_for_oid(NameOID.USER_ID)
            self._uid = str(uids[0].value) if uids else ""
        self._h2.initiate_connection()
        transport.write(self._h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        for event in self._h2.receive_data(data):
            if isinstance(event, h2.events.RequestReceived) and event.stream_id is not None:
                headers = {_text(name): _text(value) for name, value in event.headers or []}
                self._requests[event.stream_id] = (headers, bytearray())
            elif isinstance(event, h2.events.DataReceived) and event.stream_id is not None:
                self._requests[event.stream_id][1].extend(event.data or b"")
                self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id is not None:
                self._respond(event.stream_id)
        self._transport.write(self._h2.data_to_send())

    def _respond(self, stream_id: int) -> None:
        headers, body = self._requests.pop(stream_id)
        method, path = headers.pop(":method", ""), headers.pop(":path", "")
        status, answer_headers, payload = self._fake.handle(
            method,
            path,
            {k: v for k, v in headers.items() if not k.startswith(":")},
            bytes(body),
            self._uid,
        )
        response = [(":status", str(status)), *answer_headers.items()]
        if payload:
            response += [
                ("content-type", "application/json"),
                ("content-length", str(len(payload))),
            ]
        self._h2.send_headers(stream_id, response, end_stream=not payload)
        if payload:
            self._h2.send_data(stream_id, payload, end_stream=True)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _server_tls(
    client_root_ca: Path, work_dir: Path, ca_path: Path, client_certificate: bool
) -> ssl.SSLContext:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Fake APNs test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = work_dir / "fake-apns-server.pem"
    chain.write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    if client_certificate:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_root_ca))
    context.set_alpn_protocols(["h2"])
    return context


@contextmanager
def running_fake_apns(
    client_root_ca: Path, work_dir: Path, client_certificate: bool = True
) -> Iterator[FakeApns]:
    fake = FakeApns(client_root_ca, work_dir, client_certificate)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop = asyncio.Event()

    async def serve() -> None:
        server = await loop.create_server(lambda: _Http2(fake), "127.0.0.1", 0, ssl=fake._tls)
        fake.port = server.sockets[0].getsockname()[1]
        started.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10), "the fake APNs did not start"
    try:
        yield fake
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


@contextmanager
def stack_with_fake_apns(
    nats_url: str, mongo_url: str, work_dir: Path
) -> Iterator[tuple[Stack, FakeApns]]:
    """The whole stack, its events service pushing to a fake APNs that trusts the stack's
    development identity (made here first, so the fake can trust its root before the services
    start)."""
    running = new_stack(nats_url, mongo_url, work_dir)
    ensure_dev_identity(running.signing_dir)
    with running_fake_apns(running.signing_dir / "root-ca.pem", work_dir) as fake:
        running.extra_env = {
            "TESSERA_EVENTS_APNS_URL": fake.url,
            "TESSERA_EVENTS_APNS_CA_PATH": str(fake.server_ca_path),
        }
        try:
            running.start()
            yield running, fake
        finally:
            running.stop()
