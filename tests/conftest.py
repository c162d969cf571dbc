"""Fixtures: one MongoDB-wire server and one default stack per session (per pytest-xdist worker),
and a nats-server per module for tests that need one of their own.

Most end-to-end modules share the default stack: each of their tests works in accounts of its
own (`stack.new_account()`), and `stack.log_text` reads only what the module made the processes
log. A module that needs other settings defines its own `stack` fixture (tests/e2e/test_limits.py);
one that kills or pauses processes, or counts what is process- or database-wide (metrics, dead
letters), takes `own_stack` as its `stack`. A default stack's events service pushes to a fake
APNs (`fake_apns`), never to Apple.
"""

import os
import secrets
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from faststream.nats import NatsBroker

from shared.mongo import Database, MongoClient, create_client
from shared.nats import create_broker, ensure_streams
from tests.support.fake_apns import FakeApns, stack_with_fake_apns
from tests.support.servers import (
    BACKEND,
    container_mongo,
    container_nats,
    embedded_mongo,
    embedded_nats,
)
from tests.support.stack import Stack

# A developer's .env (read by the services' settings, shared/settings.py) must not change what a
# test sees: no dotenv file, in this process and in every stack it starts.
os.environ["TESSERA_ENV_FILE"] = ""


def _nats(work_dir: Path) -> AbstractContextManager[str]:
    return container_nats() if BACKEND == "containers" else embedded_nats(work_dir)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used a stack reports what its processes logged as warnings and
    errors: a lost lease, a conflict given up, a crash (only the test's output reaches CI's
    log, not the services' log files)."""
    report = yield
    if report.when == "call" and report.failed:
        funcargs = getattr(item, "funcargs", {})
        stacks = {id(value): value for value in funcargs.values() if isinstance(value, Stack)}
        for stack in stacks.values():
            if lines := stack.complaints():
                report.sections.append(("services' warnings and errors", "\n".join(lines)))
    return report


@pytest.fixture(scope="session")
def mongo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if BACKEND == "containers":
        with container_mongo() as url:
            yield url
    else:
        with embedded_mongo(tmp_path_factory.mktemp("mongo")) as url:
            yield url


@pytest.fixture
async def client(mongo_url: str) -> AsyncIterator[MongoClient]:
    """A MongoDB client on the session's store, closed after the test (modules that need
    another kind of `client` define their own)."""
    mongo = create_client(mongo_url)
    try:
        yield mongo
    finally:
        await mongo.close()


@pytest.fixture
async def db(mongo_url: str) -> AsyncIterator[Database]:
    """A database of its own on the session's store, dropped after the test (modules that need
    another kind of `db` define their own)."""
    mongo = create_client(mongo_url)
    database = mongo[f"t_{secrets.token_hex(6)}"]
    try:
        yield database
    finally:
        await mongo.drop_database(database.name)
        await mongo.close()


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _nats(tmp_path_factory.mktemp("nats")) as url:
        yield url


@pytest.fixture
async def broker(nats_url: str) -> AsyncIterator[NatsBroker]:
    """A connection to the module's nats-server with every stream declared, as a service's."""
    connected = create_broker(nats_url)
    await connected.connect()
    await ensure_streams(connected)
    try:
        yield connected
    finally:
        await connected.stop()


@pytest.fixture(scope="session")
def _shared(
    mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, FakeApns]]:
    """The default stack every module without needs of its own shares, on a nats-server of its
    own: a stack's streams and consumers are NATS-wide, so two stacks never share a server."""
    with (
        _nats(tmp_path_factory.mktemp("shared-nats")) as nats,
        stack_with_fake_apns(nats, mongo_url, tmp_path_factory.mktemp("shared-stack")) as pair,
    ):
        yield pair


@pytest.fixture(scope="module")
def stack(_shared: tuple[Stack, FakeApns]) -> Stack:
    return _shared[0].for_module()


@pytest.fixture(scope="session")
def fake_apns(_shared: tuple[Stack, FakeApns]) -> FakeApns:
    """The APNs the default stack pushes to: tests look only at their own devices' pushes."""
    return _shared[1]


@pytest.fixture(scope="module")
def own_stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A default stack for this module alone."""
    with stack_with_fake_apns(nats_url, mongo_url, tmp_path_factory.mktemp("stack")) as pair:
        yield pair[0]
