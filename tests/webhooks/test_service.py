"""Subscription commands against a real MongoDB-wire store: a create replayed on two replicas
at once (the api re-sends a command with the same command_id when its first send timed out
while the first replica is still working on it), the per-account cap under concurrent creates
on two replicas, and URLs the owner refuses."""

import asyncio
import ipaddress
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import BaseModel

from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox
from services.webhooks.service import WebhookService
from services.webhooks.targets import IPAddress, Resolve
from shared.clock import SystemClock
from shared.errors import InvalidRequest
from shared.ids import new_id
from shared.messages import CreateWebhook, DeleteWebhook, UpdateWebhook

BOX = SecretBox(Fernet.generate_key().decode())


def _fields(answer: BaseModel) -> dict[str, Any]:
    """A command's answer as the api would see it on the wire."""
    return answer.model_dump(mode="json")


async def _public_dns(host: str, port: int) -> list[IPAddress]:
    return [ipaddress.ip_address("93.184.216.34")]


def _service(
    repo: WebhookRepository, *, cap: int = 50, resolver: Resolve = _public_dns
) -> WebhookService:
    return WebhookService(
        repo, BOX, SystemClock(), allow_private=False, max_per_account=cap, resolver=resolver
    )


def _create(account_id: str = "acct_a", mode: str = "test", **fields: Any) -> CreateWebhook:
    return CreateWebhook.model_validate(
        {
            "command_id": new_id("command"),
            "account_id": account_id,
            "mode": mode,
            "url": "https://hooks.example.com/in",
            "events": ["pass.issued"],
            **fields,
        }
    )


async def _refused(service: WebhookService, command: CreateWebhook) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as refused:
        await service.handle(command)
    return refused.value


async def _count(repo: WebhookRepository, account_id: str = "acct_a", mode: str = "test") -> int:
    return await repo.webhooks.count_documents({"account_id": account_id, "mode": mode})


async def test_a_create_replayed_on_two_replicas_at_once_creates_one_webhook(
    repo: WebhookRepository,
) -> None:
    both_checking = asyncio.Barrier(2)

    async def slow_dns(host: str, port: int) -> list[IPAddress]:
        # Both replicas have looked for a stored result, and found none, before either writes.
        await both_checking.wait()
        return await _public_dns(host, port)

    replicas = [_service(repo, resolver=slow_dns) for _ in range(2)]
    command = _create()
    first, second = await asyncio.gather(*(replica.handle(command) for replica in replicas))
    assert await repo.webhooks.count_documents({}) == 1
    assert _fields(first)["id"] == _fields(second)["id"]
    assert _fields(first)["secret"] == _fields(second)["secret"]


async def test_the_cap_per_account_and_mode(repo: WebhookRepository) -> None:
    service = _service(repo, cap=3)
    created = [await service.handle(_create()) for _ in range(3)]
    refused = await _refused(service, _create())
    assert (refused.status, refused.type, refused.code, refused.param) == (
        400,
        "invalid_request_error",
        "webhook_limit_reached",
        None,
    )
    assert "3 webhooks in test mode" in refused.message
    assert await _count(repo) == 3
    # Live mode and other accounts have caps of their own.
    await service.handle(_create(mode="live"))
    await service.handle(_create(account_id="acct_b"))
    # Updating keeps the webhook's slot; deleting frees it.
    update = UpdateWebhook(
        command_id=new_id("command"),
        account_id="acct_a",
        mode="test",
        webhook_id=_fields(created[0])["id"],
        url="https://other.example.com/in",
    )
    await service.handle(update)
    await _refused(service, _create())
    delete = DeleteWebhook(
        command_id=new_id("command"),
        account_id="acct_a",
        mode="test",
        webhook_id=_fields(created[1])["id"],
    )
    await service.handle(delete)
    await service.handle(_create())
    await _refused(service, _create())
    assert await _count(repo) == 3


async def test_the_cap_is_exact_under_concurrent_creates_on_two_replicas(
    repo: WebhookRepository,
) -> None:
    creates = 24
    all_checking = asyncio.Barrier(creates)

    async def slow_dns(host: str, port: int) -> list[IPAddress]:
        # Every create has passed its URL check before any looks for a free slot.
        await all_checking.wait()
        return await _public_dns(host, port)

    replicas = [_service(repo, cap=5, resolver=slow_dns) for _ in range(2)]
    results = await asyncio.gather(
        *(replicas[n % 2].handle(_create()) for n in range(creates)), return_exceptions=True
    )
    created = [result for result in results if isinstance(result, BaseModel)]
    refused = [result for result in results if isinstance(result, InvalidRequest)]
    assert len(created) == 5
    assert len(refused) == creates - 5
    assert {error.code for error in refused} == {"webhook_limit_reached"}
    assert await _count(repo) == 5
    slots = await repo.webhooks.distinct("slot", {"account_id": "acct_a"})
    assert sorted(slots) == [0, 1, 2, 3, 4]


async def test_a_replayed_create_takes_no_second_slot(repo: WebhookRepository) -> None:
    service = _service(repo, cap=2)
    await service.handle(_create())
    last = _create()
    first = await service.handle(last)
    # Replayed once the cap is reached: the stored result answers, with the same secret.
    replayed = await service.handle(last)
    assert (_fields(replayed)["id"], _fields(replayed)["secret"]) == (
        _fields(first)["id"],
        _fields(first)["secret"],
    )
    assert await _count(repo) == 2


async def test_a_create_replayed_at_once_for_the_last_slot_answers_its_webhook(
    repo: WebhookRepository,
) -> None:
    both_checking = asyncio.Barrier(2)

    async def slow_dns(host: str, port: int) -> list[IPAddress]:
        await both_checking.wait()
        return await _public_dns(host, port)

    replicas = [_service(repo, cap=1, resolver=slow_dns) for _ in range(2)]
    command = _create()
    first, second = await asyncio.gather(*(replica.handle(command) for replica in replicas))
    assert _fields(first)["id"] == _fields(second)["id"]
    assert _fields(first)["secret"] == _fields(second)["secret"]
    assert await _count(repo) == 1


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/in\r\nX-Injected: 1",
        "https://hooks.example.com/\x00",
        "https://hooks.example.com/\tin",
        "https://hooks.example.com/\x7f",
        "https://hooks.example.com/\x85",
        "https://hooks.example.com/a b",
        "http://[64:ff9b::169.254.169.254]/latest/meta-data",
        "http://[2002:a9fe:a9fe::1]/",
    ],
)
async def test_the_owner_refuses_unsafe_urls(repo: WebhookRepository, url: str) -> None:
    service = _service(repo, resolver=lambda host, port: _public_dns_or_literal(host))
    refused = await _refused(service, _create(url=url))
    assert (refused.status, refused.param, refused.code) == (400, "url", "url_invalid")
    assert await repo.webhooks.count_documents({}) == 0


async def _public_dns_or_literal(host: str) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        return await _public_dns(host, 0)


class _DisabledRightAfterTheRead(WebhookRepository):
    """Auto-disable commits between an update's read of the webhook and its write."""

    async def get(self, account_id: str, mode: str, webhook_id: str) -> Any:
        record = await super().get(account_id, mode, webhook_id)
        if record is not None and record.enabled:
            await self.webhooks.update_one(
                {"_id": webhook_id},
                {"$set": {"enabled": False, "disabled_reason": "failing"}},
            )
        return record


async def test_enabling_while_auto_disable_commits_clears_its_reason(
    repo: WebhookRepository,
) -> None:
    """`enabled: true` read the webhook as enabled and set that alone: left enabled with its
    `disabled_reason` and failure streak, it was disabled again at its next failure, and the
    gauge counted it as disabled."""
    created = await _service(repo).handle(_create())
    webhook_id = _fields(created)["id"]
    await repo.webhooks.update_one(
        {"_id": webhook_id}, {"$set": {"failing_since": datetime.now(UTC)}}
    )
    racing = _service(_DisabledRightAfterTheRead(repo.webhooks.database))
    update = UpdateWebhook.model_validate(
        {
            "command_id": new_id("command"),
            "account_id": "acct_a",
            "mode": "test",
            "webhook_id": webhook_id,
            "enabled": True,
        }
    )
    answer = _fields(await racing.handle(update))
    stored = await repo.webhooks.find_one({"_id": webhook_id})
    assert stored is not None
    assert (stored["enabled"], stored["disabled_reason"], stored["failing_since"]) == (
        True,
        None,
        None,
    )
    assert (answer["enabled"], answer["disabled_reason"]) == (True, None)
    assert await repo.count_auto_disabled() == 0


@pytest.mark.parametrize("char", ["\u202e", "\u200b", "\u00ad"])
async def test_the_owner_refuses_invisible_characters_in_a_new_url(
    repo: WebhookRepository, char: str
) -> None:
    refused = await _refused(_service(repo), _create(url=f"https://hooks.example.com/a{char}b"))
    assert (refused.param, refused.code) == ("url", "url_invalid")
