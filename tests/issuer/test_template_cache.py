"""The issuer's template cache (services/issuer/template_cache.py) on a real nats-server and
store, with two issuer services standing for two replicas: a template is read once, then passes
are issued from memory; once one replica's PATCH answers, the other issues from the changed
template (an archive refuses at once, a new design is used at once), also on a replay of that
PATCH."""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from services.issuer.template_cache import TemplateCache
from shared.clock import SystemClock
from shared.errors import InvalidRequest
from shared.messages import CreatePass, UpdateTemplate
from shared.models import PassRecord, TemplateRecord
from tests.support.api import TEMPLATE_BODY
from tests.support.caches import started_caches
from tests.support.database import commands_sent
from tests.support.issuer import command_base, template_command

DEADLINE_SECONDS = 10.0
Replicas = Callable[[int], Awaitable[list[IssuerService]]]


@pytest.fixture
async def replicas(
    nats_url: str, repo: IssuerRepository, artifacts: WalletArtifacts
) -> AsyncIterator[Replicas]:
    """`replicas(n)`: n issuer services on one store, each with its own cache and connection."""
    async with AsyncExitStack() as stack:

        async def make(count: int) -> list[IssuerService]:
            caches = await started_caches(
                stack, nats_url, count, lambda broker, n: TemplateCache(broker, f"issuer-{n}")
            )
            return [
                IssuerService(repo, artifacts, SystemClock(), lambda: None, templates=cache)
                for cache in caches
            ]

        yield make


async def _issue(service: IssuerService, template_id: str) -> PassRecord:
    record = await service.handle(CreatePass(**command_base(), template_id=template_id))
    assert isinstance(record, PassRecord)
    return record


async def test_a_template_is_read_once_then_passes_are_issued_from_memory(
    replicas: Replicas, repo: IssuerRepository
) -> None:
    [service] = await replicas(1)
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    await _issue(service, template.id)
    with commands_sent() as reads:
        for _ in range(3):
            await _issue(service, template.id)

    assert "find" not in reads  # every command: its writes and its commit only
    assert await repo.passes.count_documents({}) == 4


async def test_once_a_patch_answers_every_replica_issues_from_the_changed_template(
    replicas: Replicas,
) -> None:
    first, second = await replicas(2)
    template = await first.handle(template_command())
    assert isinstance(template, TemplateRecord)
    await _issue(second, template.id)  # the second replica holds the template now

    moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
    await first.handle(UpdateTemplate(**command_base(), template_id=template.id, design=moved))
    assert (await _issue(second, template.id)).design_version == 2

    archive = UpdateTemplate(**command_base(), template_id=template.id, archived=True)
    await first.handle(archive)
    with pytest.raises(InvalidRequest) as refused:
        await _issue(second, template.id)
    assert refused.value.code == "template_archived"


async def test_a_replayed_patch_drops_the_template_everywhere_again(replicas: Replicas) -> None:
    first, second = await replicas(2)
    template = await first.handle(template_command())
    assert isinstance(template, TemplateRecord)
    await _issue(second, template.id)  # the second replica holds the template now
    archive = UpdateTemplate(**command_base(), template_id=template.id, archived=True)
    # The PATCH committed, but its invalidation never went out (its replica died at once).
    await first._handle_with_retries(archive)
    await _issue(second, template.id)  # still from memory: what the replay is for

    await first.handle(archive)  # the client's retry, with the same Idempotency-Key

    with pytest.raises(InvalidRequest) as refused:
        await _issue(second, template.id)
    assert refused.value.code == "template_archived"
