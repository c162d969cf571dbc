"""`tessera up --nats-cluster N`: N nats-server processes on loopback, routed into one cluster
with JetStream on each (docs/scaling.md).

Each node has its own store under DIR/nats-cluster/<name>, its client port, its cluster (route)
port and its monitoring port (`/varz`, `/jsz`: how leaders are found). Every node lists every
node's route, so any one of them can start or restart first. The services get every client URL
(TESSERA_NATS_URL, comma-separated) and create each stream with N replicas.
"""

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from tessera.processes import executable, free_port

CLUSTER_NAME = "tessera"


@dataclass(frozen=True)
class NatsNode:
    name: str
    host: str
    client_port: int
    route_port: int
    monitor_port: int
    store_dir: Path

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.client_port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{self.host}:{self.monitor_port}"

    def argv(self, routes: list[str]) -> list[str]:
        return [
            executable("nats-server"),
            "-js",
            "-sd",
            str(self.store_dir),
            "-n",
            self.name,
            "-a",
            self.host,
            "-p",
            str(self.client_port),
            "-m",
            str(self.monitor_port),
            "--cluster_name",
            CLUSTER_NAME,
            "--cluster",
            f"nats://{self.host}:{self.route_port}",
            "--routes",
            ",".join(routes),
        ]

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "url": self.url, "monitor_url": self.monitor_url}


def plan_nodes(host: str, count: int, data_dir: Path) -> list[NatsNode]:
    return [
        NatsNode(
            name=f"nats-{index}",
            host=host,
            client_port=free_port(host),
            route_port=free_port(host),
            monitor_port=free_port(host),
            store_dir=data_dir / "nats-cluster" / f"nats-{index}",
        )
        for index in range(1, count + 1)
    ]


def routes(nodes: list[NatsNode]) -> list[str]:
    return [f"nats://{node.host}:{node.route_port}" for node in nodes]


def client_urls(nodes: list[NatsNode]) -> str:
    return ",".join(node.url for node in nodes)


def wait_meta_leader(nodes: list[NatsNode], deadline: float) -> str:
    """Wait until the nodes agree on a JetStream meta leader (streams can be created from then
    on); returns its name."""
    with httpx2.Client(timeout=1.0) as client:
        while True:
            leaders = {meta_leader(client, node) for node in nodes}
            if len(leaders) == 1 and (leader := leaders.pop()):
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError("the NATS cluster elected no JetStream meta leader in time")
            time.sleep(0.2)


def meta_leader(client: httpx2.Client, node: NatsNode) -> str | None:
    """The JetStream meta leader `node` sees; None while it sees none or does not answer."""
    try:
        jsz: dict[str, Any] = client.get(f"{node.monitor_url}/jsz").json()
    except (httpx2.HTTPError, ValueError):
        return None
    leader = (jsz.get("meta_cluster") or {}).get("leader")
    return str(leader) if leader else None
