"""A webhook receiver for tests: a real HTTP server on loopback that records every request.

Each webhook in a test gets its own path; `behave(path, ...)` tells that path how to answer:
fail its first N requests per delivery (counted by the `webhook-id` header), answer slowly,
redirect, or send a long body. `requests(path)` lists what arrived, and when; `attempts(path)`
counts requests per delivery, so a test can check that no attempt was sent twice.
"""

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    status: int  # what the receiver answered
    at: float  # time.time() on arrival (body read), to compare with stored times

    @property
    def delivery_id(self) -> str:
        return self.headers.get("webhook-id", "")


@dataclass
class Behaviour:
    fail_times: int = 0  # per delivery: the first N requests answer fail_status
    fail_status: int = 500
    status: int = 200
    body: str = "ok"
    delay_seconds: float = 0.0  # wait this long before answering (a slow endpoint)
    redirect_to: str | None = None  # answer 302 with this Location
    headers: dict[str, str] = field(default_factory=dict)  # sent with every answer
    served: Counter[str] = field(default_factory=Counter)


class Receiver:
    def __init__(self, server: ThreadingHTTPServer):
        self._server = server
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self._behaviours: dict[str, Behaviour] = {}
        self._in_flight: Counter[str] = Counter()
        self._most_in_flight: Counter[str] = Counter()
        self.closing = threading.Event()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def behave(self, path: str, **settings: Any) -> None:
        with self._lock:
            self._behaviours[path] = Behaviour(**settings)

    def requests(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self._received if path is None or r.path == path]

    def in_flight(self, path: str) -> int:
        """The requests to `path` being answered now (arrived, not yet answered)."""
        with self._lock:
            return self._in_flight[path]

    def most_in_flight(self, path: str) -> int:
        """The most requests to `path` that were being answered at once."""
        with self._lock:
            return self._most_in_flight[path]

    def answered(self, path: str) -> None:
        with self._lock:
            self._in_flight[path] -= 1

    def attempts(self, path: str) -> Counter[str]:
        """Requests received per delivery id."""
        return Counter(r.delivery_id for r in self.requests(path))

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[Behaviour, int]:
        with self._lock:
            behaviour = self._behaviours.setdefault(path, Behaviour())
            delivery = headers.get("webhook-id", "")
            behaviour.served[delivery] += 1
            if behaviour.redirect_to is not None:
                status = 302
            elif behaviour.served[delivery] <= behaviour.fail_times:
                status = behaviour.fail_status
            else:
                status = behaviour.status
            self._received.append(Received(path, headers, body, status, time.time()))
            self._in_flight[path] += 1
            self._most_in_flight[path] = max(self._most_in_flight[path], self._in_flight[path])
            return behaviour, status


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if len(body) < length:
                # The sender died mid-request (the fault suite kills it): like any HTTP server,
                # drop the truncated request instead of recording it.
                self.close_connection = True
                return
            headers = {name.lower(): value for name, value in self.headers.items()}
            behaviour, status = receiver.answer(self.path, headers, body)
            try:
                self._respond(behaviour, status)
            finally:
                receiver.answered(self.path)

        def _respond(self, behaviour: Behaviour, status: int) -> None:
            if behaviour.delay_seconds and receiver.closing.wait(behaviour.delay_seconds):
                # Hang up rather than wait for another request on this connection, so a sender
                # still waiting for the answer learns at once that none is coming.
                self.close_connection = True
                return
            payload = behaviour.body.encode()
            try:
                self.send_response(status)
                if behaviour.redirect_to is not None:
                    self.send_header("Location", behaviour.redirect_to)
                for name, value in behaviour.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                # The sender hung up before the answer (a webhooks service killed mid-attempt).
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 overflows when replicas open their connection pools
    # at once (a burst, a takeover after kill -9): the dropped SYNs are retried by the kernel
    # after 1 s, 3 s, 7 s, which can outlast a short attempt timeout and fail an attempt.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A sender killed mid-connection (the fault suite does it on purpose) is not an error
        # of the receiver: no traceback for it.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@contextmanager
def running_receiver(host: str = "127.0.0.1") -> Iterator[Receiver]:
    server = _Server((host, 0), BaseHTTPRequestHandler)
    server.daemon_threads = True
    receiver = Receiver(server)
    server.RequestHandlerClass = _handler(receiver)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5.0)
