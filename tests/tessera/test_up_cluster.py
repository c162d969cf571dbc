"""`tessera up --nats-cluster 3` (issue 17, acceptance 1 and 3): three nats-server nodes routed
into one JetStream cluster, every stream with three replicas (read from the nodes' own
monitoring endpoints), the README walk-through served, every node stopped within 10 s of the
stack, and the streams' data kept across a restart on the same data dir."""

import re
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tessera.nats_cluster import NatsNode
from tessera.processes import free_port_block, ports_needed
from tests.e2e.test_readme import WAIT, walkthrough_script
from tests.support.nats_monitor import stream_details
from tests.support.polling import poll
from tests.tessera.test_launcher import _start, _stop, _stops_cleanly, _wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
STREAMS = {"TESSERA_EVENTS", "TESSERA_LIVE_UPDATES"}


def _streams(monitor_url: str) -> dict[str, dict[str, Any]]:
    """The streams a node knows, by name, as its /jsz reports them (config, state, cluster)."""
    jsz = httpx2.get(f"{monitor_url}/jsz", params={"streams": "true", "config": "true"}).json()
    return stream_details(jsz)


def _has_every_stream(streams: dict[str, dict[str, Any]]) -> bool:
    return set(streams) >= STREAMS


def _node_pids(data_dir: Path) -> list[int]:
    """The nats-server processes whose store is under `data_dir` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmdline
            and cmdline[0].endswith(b"nats-server")
            and str(data_dir).encode() in b" ".join(cmdline)
        ):
            pids.append(int(entry.name))
    return pids


def _walk_through(base_url: str, key: str, work_dir: Path) -> str:
    """The README walk-through up to its one-minute wait for a link to expire."""
    work_dir.mkdir()
    script = walkthrough_script().split(WAIT)[0].replace("http://127.0.0.1:8000", base_url)
    done = subprocess.run(
        ["/bin/bash", "-euo", "pipefail", "-c", script],
        cwd=work_dir,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "TESSERA_KEY": key},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_up_with_a_three_node_nats_cluster(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    port = free_port_block(ports_needed(1))
    proc = _start(data_dir, port, log, "--nats-cluster", "3")
    try:
        ready = _wait_ready(data_dir, proc)
        nodes: list[dict[str, str]] = ready["nats_nodes"]  # type: ignore[assignment]
        assert [node["name"] for node in nodes] == ["nats-1", "nats-2", "nats-3"]
        assert ready["nats_url"] == ",".join(node["url"] for node in nodes)
        banner = log.read_text()
        assert "NATS cluster   3 nodes" in banner
        for node in nodes:
            assert node["url"] in banner
        assert len(_node_pids(data_dir)) == 3

        key = re.search(r"Test API key:\s+(svc_test_\S+)", banner)
        assert key is not None, banner
        stdout = _walk_through(ready["base_url"], key.group(1), tmp_path / "walk")
        assert "200 application/vnd.apple.pkpass" in stdout
        assert '"error"' not in stdout

        # Every node reports both streams with three replicas: a leader and two followers.
        for node in nodes:
            streams = poll(partial(_streams, node["monitor_url"]), _has_every_stream)
            for name in STREAMS:
                stream = streams[name]
                assert stream["config"]["num_replicas"] == 3, (node["name"], name)
                cluster = stream["cluster"]
                assert cluster.get("leader"), (node["name"], name, cluster)
                assert len(cluster.get("replicas") or []) == 2, (node["name"], name, cluster)
        events = poll(
            lambda: _streams(nodes[0]["monitor_url"])["TESSERA_EVENTS"]["state"]["messages"],
            lambda count: count >= 2,  # the walk-through's pass: created, downloaded, ...
            message="the walk-through's events on the stream",
        )

        _stops_cleanly(proc, data_dir)
        assert _node_pids(data_dir) == []

        # A restart on the same data dir keeps every stream's data.
        proc = _start(data_dir, port, log, "--nats-cluster", "3")
        ready = _wait_ready(data_dir, proc)
        nodes = ready["nats_nodes"]  # type: ignore[assignment]
        kept = poll(
            lambda: _streams(nodes[0]["monitor_url"]).get("TESSERA_EVENTS", {}).get("state", {}),
            lambda state: state.get("messages", 0) >= events,
            message="the events stream's messages after the restart",
        )
        assert kept["messages"] >= events
        _stops_cleanly(proc, data_dir)
    finally:
        if proc.poll() is None:
            _stop(proc)


def test_a_node_lists_every_route_and_its_own_store(tmp_path: Path) -> None:
    node = NatsNode("nats-2", "127.0.0.1", 4222, 6222, 8222, tmp_path / "nats-2")
    argv = node.argv(["nats://127.0.0.1:6221", "nats://127.0.0.1:6222"])
    assert argv[argv.index("-n") + 1] == "nats-2"
    assert argv[argv.index("-sd") + 1] == str(tmp_path / "nats-2")
    assert argv[argv.index("--cluster_name") + 1] == "tessera"
    assert argv[argv.index("--routes") + 1] == "nats://127.0.0.1:6221,nats://127.0.0.1:6222"
    assert node.describe() == {
        "name": "nats-2",
        "url": "nats://127.0.0.1:4222",
        "monitor_url": "http://127.0.0.1:8222",
    }
