"""A command that keeps conflicting (a transaction abandoned by a crashed issuer holds its keys
until the store's lifetime limit) gets a retryable error within its budget, then succeeds once
the blocker is gone."""

import secrets
import time
import uuid
from types import SimpleNamespace
from typing import cast

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.errors import InternalError, PayloadTooLarge
from shared.messages import CreateTemplate
from shared.mongo import create_client
from tests.support.flows import TEMPLATE_BODY


def _create_template(command_id: str) -> CreateTemplate:
    return CreateTemplate(
        command_id=command_id,
        account_id="acct_conflict",
        mode="test",
        name=TEMPLATE_BODY["name"],
        template_type=TEMPLATE_BODY["type"],
        apple_style=TEMPLATE_BODY["apple_style"],
        design=TEMPLATE_BODY["design"],
    )


async def test_a_conflict_that_outlasts_the_budget_is_a_retryable_error(mongo_url: str) -> None:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = IssuerRepository(client, db)
    # Template commands need no wallet artifacts; the service only keeps a reference.
    artifacts = cast(WalletArtifacts, SimpleNamespace(identities=None))
    service = IssuerService(
        repo, artifacts, SystemClock(), lambda: None, conflict_budget_seconds=0.5
    )
    command_id = str(uuid.uuid4())
    await repo.processed.insert_one({"_id": "warm-up"})
    blocker = client.start_session()
    try:
        # Like the first attempt of a command whose issuer died before committing.
        await blocker.start_transaction()
        await repo.processed.insert_one({"_id": command_id, "result": {}}, session=blocker)
        started = time.monotonic()
        with pytest.raises(InternalError) as raised:
            await service.handle(_create_template(command_id))
        assert raised.value.code == "write_conflict"
        assert "retry" in raised.value.message
        assert time.monotonic() - started < 5
        await blocker.abort_transaction()
        result = await service.handle(_create_template(command_id))
        assert result.model_dump()["name"] == TEMPLATE_BODY["name"]
        # A replay answers from the stored result.
        assert await service.handle(_create_template(command_id)) == result
    finally:
        await blocker.end_session()
        await client.drop_database(db.name)
        await client.close()


async def test_a_result_nats_could_not_carry_is_refused_before_anything_is_written(
    mongo_url: str,
) -> None:
    """A stored result whose reply cannot be sent answers a timeout forever (issue 10, F02)."""
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = IssuerRepository(client, db)
    artifacts = cast(WalletArtifacts, SimpleNamespace(identities=None))
    service = IssuerService(
        repo, artifacts, SystemClock(), lambda: None, message_limit=lambda: 40_000
    )
    big = {
        **TEMPLATE_BODY["design"],
        "localizations": {"de": {f"k{i}": "x" * 2000 for i in range(20)}},
    }
    command = _create_template(str(uuid.uuid4())).model_copy(update={"design": big})
    try:
        with pytest.raises(PayloadTooLarge) as raised:
            await service.handle(command)
        assert raised.value.code == "result_too_large"
        assert await repo.templates.count_documents({}) == 0
        assert await repo.processed.count_documents({}) == 0
    finally:
        await client.drop_database(db.name)
        await client.close()
