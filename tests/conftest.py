"""Fixtures: one MongoDB-wire server per session, one nats-server and one stack per module."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import (
    BACKEND,
    container_mongo,
    container_nats,
    embedded_mongo,
    embedded_nats,
)
from tests.support.stack import Stack, new_stack, serving


@pytest.fixture(scope="session")
def mongo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if BACKEND == "containers":
        with container_mongo() as url:
            yield url
    else:
        with embedded_mongo(tmp_path_factory.mktemp("mongo")) as url:
            yield url


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if BACKEND == "containers":
        with container_nats() as url:
            yield url
    else:
        with embedded_nats(tmp_path_factory.mktemp("nats")) as url:
            yield url


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    work_dir: Path = tmp_path_factory.mktemp("stack")
    running = new_stack(nats_url, mongo_url, work_dir)
    with serving(running):
        yield running
