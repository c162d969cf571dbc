"""Fixtures of the fault-injection suite: its own nats-server and store (restartable in place),
its own stack on them, and a webhook receiver. Nothing here is shared with other suites."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.faults import Server, nats_server, running, store_server
from tests.support.receiver import Receiver, running_receiver
from tests.support.stack import Stack, new_stack, serving

# Processes per service: two, so the faults also show that replicas add no duplicate effects.
REPLICAS = 2

# Short enough for the suite to settle in CI time: an attempt cut short by a killed webhooks
# service is taken over when its lease runs out, and a failed attempt is retried soon.
FAULT_ENV = {
    "TESSERA_WEBHOOK_TIMEOUT_SECONDS": "5",
    "TESSERA_WEBHOOKS_LEASE_SECONDS": "8",
    "TESSERA_WEBHOOK_RETRY_SCHEDULE": "0,1,2,4,8,15,30",
    # A killed issuer's job chunks are taken over when their lease runs out.
    "TESSERA_ISSUER_JOB_LEASE_SECONDS": "10",
}


def _new_stack(nats_url: str, mongo_url: str, work_dir: Path) -> Stack:
    return new_stack(nats_url, mongo_url, work_dir, replicas=REPLICAS)


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(nats_server(tmp_path_factory.mktemp("nats"))) as server:
        yield server


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(store_server(tmp_path_factory.mktemp("store"))) as server:
        yield server


@pytest.fixture(scope="module")
def stack(nats: Server, store: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    built = _new_stack(nats.url, store.url, tmp_path_factory.mktemp("stack"))
    built.extra_env = FAULT_ENV
    with serving(built):
        yield built


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running_one:
        yield running_one
