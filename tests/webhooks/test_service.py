"""Subscription commands replayed on two replicas at once (the api re-sends a command with the
same command_id when its first send timed out while the first replica is still working on it)."""

import asyncio
import ipaddress

from cryptography.fernet import Fernet

from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox
from services.webhooks.service import WebhookService
from services.webhooks.targets import IPAddress
from shared.clock import SystemClock
from shared.ids import new_id
from shared.messages import CreateWebhook


async def test_a_create_replayed_on_two_replicas_at_once_creates_one_webhook(
    repo: WebhookRepository,
) -> None:
    both_checking = asyncio.Barrier(2)

    async def slow_dns(host: str, port: int) -> list[IPAddress]:
        # Both replicas have looked for a stored result, and found none, before either writes.
        await both_checking.wait()
        return [ipaddress.ip_address("93.184.216.34")]

    box = SecretBox(Fernet.generate_key().decode())
    replicas = [
        WebhookService(repo, box, SystemClock(), allow_private=False, resolver=slow_dns)
        for _ in range(2)
    ]
    command = CreateWebhook(
        command_id=new_id("command"),
        account_id="acct_a",
        mode="test",
        url="https://hooks.example.com/in",
        events=["pass.issued"],
    )
    first, second = await asyncio.gather(*(replica.handle(command) for replica in replicas))
    assert await repo.webhooks.count_documents({}) == 1
    assert first["id"] == second["id"]
    assert first["secret"] == second["secret"]
