"""A connection to the store that fails inside a transaction (the store restarted, the network
broke) is not an error the caller sees: PyMongo labels it TransientTransactionError, nothing
of the transaction committed, and the whole transaction runs again. Before, a command answered
500 `service_unavailable` for it (CI, stop 21).

The issuer and the outbox talk to the real store through a TCP proxy on a real socket that
closes the connection carrying the first statement of the next transaction."""

import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pymongo.asynchronous.client_session import AsyncClientSession

from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.messages import CreatePass
from shared.models import PassRecord, TemplateRecord
from shared.mongo import MongoClient, create_client
from shared.outbox import Outbox
from tests.support.issuer import (
    command_base,
    dev_artifacts,
    issuer_repository,
    template_command,
)
from tests.support.tcp_proxy import CuttingProxy, cutting_proxy

FIRST_STATEMENT = b"startTransaction"


@pytest.fixture
async def proxy(mongo_url: str) -> AsyncIterator[CuttingProxy]:
    address = urlsplit(mongo_url)
    assert address.hostname is not None
    assert address.port is not None
    async with cutting_proxy(address.hostname, address.port) as running:
        yield running


@pytest.fixture
async def client(proxy: CuttingProxy) -> AsyncIterator[MongoClient]:
    mongo = create_client(_through(proxy))
    try:
        yield mongo
    finally:
        await mongo.close()


@pytest.fixture
async def repo(proxy: CuttingProxy) -> AsyncIterator[IssuerRepository]:
    async with issuer_repository(_through(proxy)) as repository:
        yield repository


async def test_a_command_whose_connection_drops_mid_transaction_runs_again_once(
    proxy: CuttingProxy, repo: IssuerRepository, tmp_path: Path
) -> None:
    service = IssuerService(repo, dev_artifacts(tmp_path), SystemClock(), lambda: None)
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)

    proxy.cut_next(FIRST_STATEMENT)
    created = await service.handle(CreatePass(**command_base(), template_id=template.id))

    assert proxy.cuts == 1
    assert isinstance(created, PassRecord)
    assert await repo.passes.count_documents({}) == 1
    assert await repo.db["outbox"].count_documents({}) == 1
    assert await repo.processed.count_documents({}) == 2  # the template's and the pass's


async def test_the_outbox_runs_a_transaction_again_when_its_connection_drops(
    proxy: CuttingProxy, client: MongoClient
) -> None:
    db = client[f"t_{secrets.token_hex(6)}"]
    outbox = Outbox(db, "test", "outbox")
    records = db["records"]
    await records.insert_one({"_id": "warm-up"})  # the collection exists before the cut

    async def write(session: AsyncClientSession) -> str:
        await records.insert_one({"_id": "record"}, session=session)
        await outbox.insert(str(uuid.uuid4()), "tessera.events.x", b"{}", _now(), session)
        return "written"

    try:
        proxy.cut_next(FIRST_STATEMENT)
        assert await outbox.in_transaction(write) == "written"
        assert proxy.cuts == 1
        assert await records.count_documents({"_id": "record"}) == 1
        assert await outbox.documents.count_documents({}) == 1
    finally:
        await client.drop_database(db.name)


def _through(proxy: CuttingProxy) -> str:
    return f"mongodb://127.0.0.1:{proxy.port}/?directConnection=true"


def _now() -> datetime:
    return datetime.now(UTC)
