"""Issue 17: the fault scenario of tests/faults/test_kill_and_restart.py on a three-node NATS
JetStream cluster, every stream with three replicas (docs/scaling.md).

Under the same load (clients issuing and updating passes with Idempotency-Keys, two webhooks to
a local receiver), in turn: kill -9 of the node that leads the TESSERA_EVENTS stream, kill -9
of the JetStream meta leader, SIGTERM of a follower. Leaders are read from the nodes' own
monitoring endpoints (`/jsz`), never guessed. Each node stays down until passes issued after
the fault have their events recorded (published to the stream and consumed on the surviving
nodes), then starts again on its own store. The checks are the single-node scenario's: every
2xx pass exists once, one `created` event per pass and (version - 1) `updated` events, no
duplicate event id, every webhook delivery delivered once by the schedule.

A core NATS subscriber on `tessera.events.>` measures the longest stretch without a published
event during each fault. TESSERA_TEST_STREAM_REPLICAS=1 runs the scenario with single-replica
streams: it then fails, since the stream's only copy goes down with its node.
"""

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import nats
import pytest

from tessera.nats_cluster import NatsNode, meta_leader, plan_nodes, routes, wait_meta_leader
from tessera.processes import Child, base_env
from tests.faults.conftest import FAULT_ENV, REPLICAS
from tests.support.fault_scenario import Fault, run_under_faults
from tests.support.faults import HOST, Server, running, store_server
from tests.support.nats_monitor import stream_details
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack, new_stack, serving

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.slow]

EVENTS_STREAM = "TESSERA_EVENTS"
STREAM_REPLICAS = os.environ.get("TESSERA_TEST_STREAM_REPLICAS", "3")


@dataclass
class Cluster:
    nodes: list[NatsNode]
    servers: dict[str, Server]  # by node name

    @property
    def urls(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def jsz(self, **params: str) -> dict[str, Any]:
        """/jsz of the first node that answers."""
        for node in self.nodes:
            try:
                found: dict[str, Any] = httpx2.get(
                    f"{node.monitor_url}/jsz", params=params, timeout=2.0
                ).json()
            except (httpx2.HTTPError, ValueError):
                continue
            return found
        raise AssertionError("no NATS node answers /jsz")

    def meta_leader(self) -> str:
        leader = (self.jsz().get("meta_cluster") or {}).get("leader")
        assert leader, "the cluster has no meta leader"
        return str(leader)

    def stream_leader(self, stream: str = EVENTS_STREAM) -> str:
        detail = stream_details(self.jsz(streams="true")).get(stream) or {}
        leader = (detail.get("cluster") or {}).get("leader")
        assert leader, f"{stream} has no leader"
        return str(leader)

    def events_stream_view(self) -> dict[str, Any]:
        """What the cluster says of itself: the meta leader each node sees, and the events
        stream's leader and replicas (as the first node that answers reports them)."""
        with httpx2.Client(timeout=2.0) as client:
            leaders = [meta_leader(client, node) for node in self.nodes]
        detail = stream_details(self.jsz(streams="true")).get(EVENTS_STREAM) or {}
        return {"meta_leaders": leaders, "stream": detail.get("cluster")}


def _whole(view: dict[str, Any]) -> bool:
    """Every node up and agreeing on one meta leader; the events stream led, with every
    replica online and heard from lately. (`current` is not required: under the load a
    follower is a few messages behind most of the time.)"""
    leaders = set(view["meta_leaders"])
    if len(leaders) != 1 or None in leaders:
        return False
    stream = view["stream"] or {}
    replicas = stream.get("replicas") or []
    return (
        bool(stream.get("leader"))
        and len(replicas) == 2
        and all(not r.get("offline") and r.get("active", 0) < 10e9 for r in replicas)
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work_dir = tmp_path_factory.mktemp("nats-cluster")
    nodes = plan_nodes(HOST, 3, work_dir)
    all_routes = routes(nodes)
    servers = {
        node.name: Server(
            node.name,
            Child(node.name, node.argv(all_routes), base_env(), work_dir / f"{node.name}.log"),
            node.client_port,
            node.url,
        )
        for node in nodes
    }
    for server in servers.values():
        server.start()
    try:
        wait_meta_leader(nodes, time.monotonic() + 30)
        yield Cluster(nodes, servers)
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(store_server(tmp_path_factory.mktemp("store"))) as server:
        yield server


@pytest.fixture(scope="module")
def stack(
    cluster: Cluster, store: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    built = new_stack(cluster.urls, store.url, tmp_path_factory.mktemp("stack"), REPLICAS)
    built.extra_env = {**FAULT_ENV, "TESSERA_EVENTS_STREAM_REPLICAS": STREAM_REPLICAS}
    with serving(built):
        yield built


@dataclass
class Publishes:
    """When each event reached a core subscriber (connected to every node, so it rides out a
    node loss too): the gaps are the stretches without a successful publish."""

    urls: str
    arrivals: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._listen(ready),))
        self._thread.start()
        assert ready.wait(10), "the publish counter could not subscribe"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def longest_gap(self, since: float, until: float) -> float:
        inside = [t for t in self.arrivals if since <= t <= until]
        edges = [since, *inside, until]
        return max(b - a for a, b in itertools.pairwise(edges))

    async def _listen(self, ready: threading.Event) -> None:
        servers = self.urls.split(",")
        client = await nats.connect(
            servers=servers, max_reconnect_attempts=-1, reconnect_time_wait=0.2
        )

        async def arrived(_: Any) -> None:
            self.arrivals.append(time.monotonic())

        await client.subscribe("tessera.events.>", cb=arrived)
        await client.flush()
        ready.set()
        await asyncio.to_thread(self._stop.wait)
        await client.close()


def _node_fault(cluster: Cluster, label: str, pick: Any, *, kill: bool, log: list[str]) -> Fault:
    """Stop the node `pick()` names when the fault comes (SIGKILL or SIGTERM); start it again
    on its own store once the scenario saw the stack work without it."""
    down: dict[str, Server] = {}

    def inject() -> None:
        name = pick()
        log.append(f"  {label}: {name}")
        down["server"] = cluster.servers[name]
        down["server"].stop(kill=kill)

    def recover() -> None:
        down["server"].start()
        poll(
            cluster.events_stream_view,
            _whole,
            timeout=90,
            message=f"the cluster whole again after {label}",
        )

    return Fault(label, inject, recover)


def _a_follower(cluster: Cluster) -> str:
    leaders = {cluster.meta_leader(), cluster.stream_leader()}
    return next(node.name for node in cluster.nodes if node.name not in leaders)


@pytest.mark.timeout(420)
def test_the_stack_rides_out_the_loss_of_any_nats_node(
    cluster: Cluster, stack: Stack, receiver: Receiver
) -> None:
    chosen: list[str] = []
    faults = [
        _node_fault(
            cluster,
            "kill -9 the TESSERA_EVENTS leader",
            cluster.stream_leader,
            kill=True,
            log=chosen,
        ),
        _node_fault(
            cluster, "kill -9 the JetStream meta leader", cluster.meta_leader, kill=True, log=chosen
        ),
        _node_fault(
            cluster, "SIGTERM a follower", lambda: _a_follower(cluster), kill=False, log=chosen
        ),
    ]
    windows: dict[str, tuple[float, float]] = {}
    timed = [_timed(fault, windows) for fault in faults]
    publishes = Publishes(cluster.urls)
    publishes.start()
    try:
        run_under_faults(stack, receiver, timed)
    finally:
        publishes.stop()
        print("nodes chosen:", *chosen, sep="\n")
    gaps = [
        f"  {name}: longest stretch without a published event {publishes.longest_gap(*w):.1f}s "
        f"(of {w[1] - w[0]:.1f}s with the node down)"
        for name, w in windows.items()
    ]
    print(
        f"streams with {STREAM_REPLICAS} replicas; {len(publishes.arrivals)} events published",
        *gaps,
        sep="\n",
    )


def _timed(fault: Fault, windows: dict[str, tuple[float, float]]) -> Fault:
    """The fault, noting when its node went down and when it was back."""
    started: dict[str, float] = {}

    def inject() -> None:
        started["at"] = time.monotonic()
        fault.inject()

    def recover() -> None:
        assert fault.recover is not None
        windows[fault.name] = (started["at"], time.monotonic())
        fault.recover()

    return Fault(fault.name, inject, recover)
