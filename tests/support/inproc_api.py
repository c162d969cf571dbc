"""The api service in this process, with a clock the test controls, beside a running stack.

Expiry is decided by the clock the api reads (shared.clock.Clock, injected into create_app), so
a test moves time forward instead of waiting. The api talks to the stack's real NATS and MongoDB
over real sockets; the other services stay real processes.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import uvicorn

from services.api.app import create_app
from services.api.config import ApiSettings
from tessera.processes import free_port
from tests.support.polling import poll
from tests.support.stack import Stack


class ManualClock:
    """A clock that stands still until a test moves it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += timedelta(seconds=seconds)


@dataclass
class InProcessApi:
    base_url: str
    clock: ManualClock


@contextmanager
def running_api(stack: Stack, clock: ManualClock) -> Iterator[InProcessApi]:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    settings = ApiSettings(
        environment="test",
        nats_url=stack.nats_url,
        mongodb_url=stack.mongo_url,
        mongodb_database=stack.database,
        base_url=base_url,
        site_url=base_url,
        port=port,
    )
    config = uvicorn.Config(
        create_app(settings, clock=clock), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="inproc-api", daemon=True)
    thread.start()
    try:
        poll(lambda: server.started or not thread.is_alive(), message="the api to start")
        if not server.started:
            raise RuntimeError("the in-process api did not start")
        yield InProcessApi(base_url=base_url, clock=clock)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
