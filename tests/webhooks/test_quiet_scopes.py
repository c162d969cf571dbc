"""Scopes without webhooks (services/webhooks/quiet_scopes.py) on a real nats-server and store,
with two webhooks services standing for two replicas: the events of an account without webhooks
cost no store read after the first batch; once one replica's create or PATCH answers, the other
fans the next event out to that webhook."""

import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
from cryptography.fernet import Fernet

from services.webhooks.delivery import plan_deliveries
from services.webhooks.quiet_scopes import QuietScopes
from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox
from services.webhooks.service import WebhookService
from services.webhooks.targets import IPAddress
from shared.clock import SystemClock
from shared.ids import new_id
from shared.messages import CreateWebhook, UpdateWebhook
from tests.support.caches import started_caches
from tests.support.database import commands_sent
from tests.webhooks.records import event

DEADLINE_SECONDS = 10.0
DELAYS = [0.0, 30.0]
BOX = SecretBox(Fernet.generate_key().decode())
Replica = tuple[WebhookService, QuietScopes]
Replicas = Callable[[int], Awaitable[list[Replica]]]


async def _public_dns(host: str, port: int) -> list[IPAddress]:
    return [ipaddress.ip_address("93.184.216.34")]


@pytest.fixture
async def replicas(nats_url: str, repo: WebhookRepository) -> AsyncIterator[Replicas]:
    """`replicas(n)`: n webhooks services on one store, each with its own cache and
    connection."""
    async with AsyncExitStack() as stack:

        async def make(count: int) -> list[Replica]:
            caches = await started_caches(
                stack, nats_url, count, lambda broker, n: QuietScopes(broker, f"webhooks-{n}")
            )
            return [(_service(repo, quiet), quiet) for quiet in caches]

        yield make


def _service(repo: WebhookRepository, quiet: QuietScopes) -> WebhookService:
    return WebhookService(
        repo,
        BOX,
        SystemClock(),
        allow_private=False,
        max_per_account=50,
        resolver=_public_dns,
        quiet=quiet,
    )


async def _planned(repo: WebhookRepository, quiet: QuietScopes) -> list[str]:
    """The webhooks one new event of acct_a (test mode) would be delivered to."""
    records, _ = await plan_deliveries(repo, SystemClock(), DELAYS, [event("created")], quiet)
    return [record.webhook_id for record in records]


def _create(**fields: Any) -> CreateWebhook:
    return CreateWebhook.model_validate(
        {
            "command_id": new_id("command"),
            "account_id": "acct_a",
            "mode": "test",
            "url": "https://hooks.example.com/in",
            "events": ["pass.issued"],
            **fields,
        }
    )


async def test_a_scope_without_webhooks_is_read_once(
    replicas: Replicas, repo: WebhookRepository
) -> None:
    [(_, quiet)] = await replicas(1)
    assert await _planned(repo, quiet) == []
    with commands_sent() as sent:
        for _ in range(3):
            assert await _planned(repo, quiet) == []
    assert sent == []


async def test_once_a_create_answers_every_replica_fans_out_to_the_new_webhook(
    replicas: Replicas, repo: WebhookRepository
) -> None:
    (first, _), (_, second_quiet) = await replicas(2)
    assert await _planned(repo, second_quiet) == []  # the second replica knows none
    created = await first.handle(_create())
    assert await _planned(repo, second_quiet) == [created.model_dump()["id"]]


async def test_once_a_patch_enables_a_webhook_every_replica_fans_out_to_it(
    replicas: Replicas, repo: WebhookRepository
) -> None:
    (first, _), (_, second_quiet) = await replicas(2)
    created = await first.handle(_create(enabled=False))
    webhook_id = created.model_dump()["id"]
    assert await _planned(repo, second_quiet) == []  # disabled by the account: none
    enable = UpdateWebhook(
        command_id=new_id("command"),
        account_id="acct_a",
        mode="test",
        webhook_id=webhook_id,
        enabled=True,
    )
    await first.handle(enable)
    assert await _planned(repo, second_quiet) == [webhook_id]


async def test_a_scope_with_webhooks_is_read_every_time(
    replicas: Replicas, repo: WebhookRepository
) -> None:
    """Only the absence of webhooks is remembered: what a webhook is (its url, secrets,
    health) is always read as it is."""
    [(service, quiet)] = await replicas(1)
    created = await service.handle(_create())
    await repo.update_fields(created.model_dump()["id"], {"url": "https://moved.example.com/"})
    records, webhooks = await plan_deliveries(
        repo, SystemClock(), DELAYS, [event("created")], quiet
    )
    assert [webhooks[record.webhook_id].url for record in records] == ["https://moved.example.com/"]
