"""The services' NATS connection under failures that close no socket (shared/nats.py): a
server gone silent is left within its pings, and streams are declared once a starting
cluster has a JetStream leader."""

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from shared import nats as shared_nats
from shared.messages import EVENTS_STREAM, LIVE_UPDATES_STREAM
from shared.nats import MAX_OUTSTANDING_PINGS, PING_SECONDS, create_broker, ensure_streams
from tessera.nats_cluster import NatsNode, plan_nodes, routes
from tests.support.tcp_proxy import cutting_proxy

HOST = "127.0.0.1"


async def _until(condition: Callable[[], bool], seconds: float) -> None:
    """Poll `condition` until it holds, for at most `seconds`."""
    async with asyncio.timeout(seconds):
        while True:
            if condition():
                return
            await asyncio.sleep(0.05)


async def test_a_server_gone_silent_is_left_within_its_pings(nats_url: str) -> None:
    """A host down or a partition closes no socket: only the client's pings tell. With
    nats-py's defaults (every 120 s, two unanswered) the services went on sending into the
    silence for 4 to 6 minutes, /readyz still 200; `create_broker` pings often enough to give
    up on it within about 15 s (here faster: a shorter ping, the same mechanism)."""
    assert PING_SECONDS * (MAX_OUTSTANDING_PINGS + 1) <= 20
    upstream = urlsplit(nats_url)
    async with cutting_proxy(upstream.hostname or HOST, upstream.port or 4222) as proxy:
        broker = create_broker(f"nats://{HOST}:{proxy.port}", ping_seconds=1)
        await broker.connect()
        try:
            assert broker.connection.is_connected
            assert await broker.ping(timeout=2.0)
            proxy.silent = True
            await _until(lambda: not broker.connection.is_connected, 10)
            assert not await broker.ping(timeout=0.5)  # what /readyz asks: now 503
            proxy.silent = False
            # and it reconnects once the server answers again
            await _until(lambda: bool(broker.connection.is_connected), 20)
        finally:
            proxy.silent = False
            await broker.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[NatsNode], list[subprocess.Popen[bytes]]]]:
    nodes = plan_nodes(HOST, 3, tmp_path)
    running: list[subprocess.Popen[bytes]] = []
    try:
        yield nodes, running
    finally:
        for proc in running:
            proc.terminate()
        for proc in running:
            proc.wait(timeout=10)


def _start(node: NatsNode, nodes: list[NatsNode]) -> subprocess.Popen[bytes]:
    node.store_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        node.argv(routes(nodes)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def test_streams_are_declared_once_a_starting_cluster_elects_its_leader(
    cluster: tuple[list[NatsNode], list[subprocess.Popen[bytes]]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A service that starts beside a cluster whose other nodes are not up yet (compose starts
    them together) finds no JetStream leader: it waits for one instead of exiting at start."""
    monkeypatch.setattr(shared_nats, "STREAM_RETRY_SECONDS", 0.2)
    nodes, running = cluster
    running.append(_start(nodes[0], nodes))
    broker = create_broker(nodes[0].url)
    async with asyncio.timeout(20):
        while True:
            try:
                await broker.connect()
                break
            except Exception:  # the node still starting
                await asyncio.sleep(0.1)
    try:
        declaring = asyncio.create_task(ensure_streams(broker, replicas=3))
        async with asyncio.timeout(30):
            while not any("could not declare stream" in r.getMessage() for r in caplog.records):
                assert not declaring.done(), declaring
                await asyncio.sleep(0.05)
        running.extend(_start(node, nodes) for node in nodes[1:])
        async with asyncio.timeout(60):
            await declaring
        js = broker.connection.jetstream()
        for stream in (EVENTS_STREAM, LIVE_UPDATES_STREAM):
            assert (await js.stream_info(stream)).config.num_replicas == 3
    finally:
        await broker.stop()
