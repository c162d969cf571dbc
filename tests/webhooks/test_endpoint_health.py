"""A webhook's health from its attempts, against a real MongoDB-wire store: failures count and
set `failing_since` once, a success ends the streak, the auto-disable after the cutoff (only
of enabled webhooks), the order of a batch, and Retry-After pauses that never shrink."""

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from services.webhooks.endpoint_health import AttemptResult, EndpointHealth
from services.webhooks.repository import WebhookRepository
from shared.mongo import count_commands
from tests.webhooks.records import webhook

# Microseconds on purpose: the store keeps milliseconds, the attempts' clock does not.
T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
DISABLE_AFTER = timedelta(days=5)
SECOND = timedelta(seconds=1)


def _ms(moment: datetime) -> datetime:
    """As the store keeps it."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


async def _hook(repo: WebhookRepository, **fields: Any) -> str:
    record = webhook(**fields)
    await repo.webhooks.insert_one(record.to_document())
    return record.id


async def _stored(repo: WebhookRepository, hook_id: str) -> dict[str, Any]:
    doc = await repo.webhooks.find_one({"_id": hook_id})
    assert doc is not None
    return doc


def _fail(hook_id: str, at: datetime, paused_until: datetime | None = None) -> AttemptResult:
    return AttemptResult(hook_id, False, at, paused_until)


def _ok(hook_id: str, at: datetime) -> AttemptResult:
    return AttemptResult(hook_id, True, at)


def _warnings(caplog: pytest.LogCaptureFixture, hook_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and hook_id in r.getMessage()
    ]


async def test_failures_count_and_set_failing_since_once(
    repo: WebhookRepository, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    health = EndpointHealth(repo, DISABLE_AFTER)
    hook_id = await _hook(repo)
    await health.record([_fail(hook_id, T0), _fail(hook_id, T0 + SECOND)], T0 + SECOND)
    stored = await _stored(repo, hook_id)
    assert (stored["failing_since"], stored["consecutive_failures"]) == (_ms(T0), 2)
    await health.record([_fail(hook_id, T0 + 2 * SECOND)], T0 + 2 * SECOND)
    stored = await _stored(repo, hook_id)
    assert (stored["failing_since"], stored["consecutive_failures"]) == (_ms(T0), 3)
    assert stored["enabled"] is True
    # Told once, when it started failing, with the time it will be disabled.
    [started] = _warnings(caplog, hook_id)
    assert "started failing" in started
    assert (_ms(T0) + DISABLE_AFTER).isoformat() in started


async def test_a_success_ends_the_streak(repo: WebhookRepository) -> None:
    health = EndpointHealth(repo, DISABLE_AFTER)
    hook_id = await _hook(repo, failing_since=T0, consecutive_failures=7)
    await health.record([_ok(hook_id, T0 + SECOND)], T0 + SECOND)
    stored = await _stored(repo, hook_id)
    assert (stored["failing_since"], stored["consecutive_failures"]) == (None, 0)
    # The next failure starts a new streak.
    await health.record([_fail(hook_id, T0 + 2 * SECOND)], T0 + 2 * SECOND)
    stored = await _stored(repo, hook_id)
    assert (stored["failing_since"], stored["consecutive_failures"]) == (_ms(T0 + 2 * SECOND), 1)


async def test_a_batch_counts_in_the_order_of_its_attempts(repo: WebhookRepository) -> None:
    health = EndpointHealth(repo, DISABLE_AFTER)
    recovered = await _hook(repo, failing_since=T0, consecutive_failures=3)
    relapsed = await _hook(repo, failing_since=T0, consecutive_failures=3)
    late = T0 + 10 * SECOND
    # Listed out of order: the success came last for one, first for the other.
    await health.record(
        [
            _ok(recovered, late + 2 * SECOND),
            _fail(recovered, late),
            _fail(relapsed, late + 3 * SECOND),
            _fail(relapsed, late + 2 * SECOND),
            _ok(relapsed, late + SECOND),
            _fail(relapsed, late),
        ],
        late + 3 * SECOND,
    )
    first = await _stored(repo, recovered)
    assert (first["failing_since"], first["consecutive_failures"]) == (None, 0)
    second = await _stored(repo, relapsed)
    streak = (second["failing_since"], second["consecutive_failures"])
    assert streak == (_ms(late + 2 * SECOND), 2)


async def test_replicas_recording_at_once_add_up(repo: WebhookRepository) -> None:
    health = [EndpointHealth(repo, DISABLE_AFTER) for _ in range(4)]
    hook_id = await _hook(repo)
    await asyncio.gather(
        *(
            one.record([_fail(hook_id, T0 + n * SECOND), _fail(hook_id, T0 + n * SECOND)], T0)
            for n, one in enumerate(health * 5)
        )
    )
    stored = await _stored(repo, hook_id)
    assert stored["consecutive_failures"] == 40
    assert stored["failing_since"] is not None


async def test_failing_for_the_whole_period_disables_only_enabled_webhooks(
    repo: WebhookRepository, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    health = EndpointHealth(repo, DISABLE_AFTER)
    now = T0 + DISABLE_AFTER
    due = await _hook(repo, failing_since=T0, consecutive_failures=50)
    young = await _hook(repo, failing_since=T0 + SECOND, consecutive_failures=50)
    by_account = await _hook(repo, enabled=False, failing_since=T0, consecutive_failures=50)
    await health.record([_fail(h, now) for h in (due, young, by_account)], now)
    disabled = await _stored(repo, due)
    assert disabled["enabled"] is False
    assert (disabled["disabled_reason"], disabled["disabled_at"]) == ("failing", _ms(now))
    assert (disabled["failing_since"], disabled["consecutive_failures"]) == (_ms(T0), 51)
    # One second short of the period: still enabled, still counted.
    still = await _stored(repo, young)
    assert (still["enabled"], still.get("disabled_reason")) == (True, None)
    assert still["consecutive_failures"] == 51
    # Disabled by its account: left as the account left it, no reason given.
    kept = await _stored(repo, by_account)
    assert (kept["enabled"], kept.get("disabled_reason"), kept.get("disabled_at")) == (
        False,
        None,
        None,
    )
    [line] = _warnings(caplog, due)
    assert "disabled: every attempt failed" in line
    assert "enabled true" in line
    assert _warnings(caplog, young) == _warnings(caplog, by_account) == []
    # A later failure neither disables it again nor moves disabled_at.
    await health.record([_fail(due, now + SECOND)], now + SECOND)
    assert (await _stored(repo, due))["disabled_at"] == _ms(now)
    assert len(_warnings(caplog, due)) == 1


async def test_a_success_in_the_batch_saves_the_webhook(repo: WebhookRepository) -> None:
    health = EndpointHealth(repo, DISABLE_AFTER)
    now = T0 + DISABLE_AFTER + SECOND
    hook_id = await _hook(repo, failing_since=T0, consecutive_failures=50)
    await health.record([_fail(hook_id, now - SECOND), _ok(hook_id, now)], now)
    stored = await _stored(repo, hook_id)
    assert (stored["enabled"], stored["failing_since"], stored["consecutive_failures"]) == (
        True,
        None,
        0,
    )


async def test_retry_after_pauses_only_lengthen(repo: WebhookRepository) -> None:
    health = EndpointHealth(repo, DISABLE_AFTER)
    hook_id = await _hook(repo)
    long, short = T0 + 30 * SECOND, T0 + 5 * SECOND
    await health.record([_fail(hook_id, T0, long), _fail(hook_id, T0, short)], T0)
    assert (await _stored(repo, hook_id))["paused_until"] == _ms(long)
    # A shorter pause recorded later (another replica's 429) never cuts a longer one short.
    await health.record([_fail(hook_id, T0 + SECOND, short)], T0 + SECOND)
    assert (await _stored(repo, hook_id))["paused_until"] == _ms(long)
    await health.record([_fail(hook_id, T0 + SECOND, long + SECOND)], T0 + SECOND)
    assert (await _stored(repo, hook_id))["paused_until"] == _ms(long + SECOND)


async def test_successes_to_webhooks_read_without_a_streak_write_nothing(
    repo: WebhookRepository,
) -> None:
    """The first attempts of a batch carry what the batch read of their webhook: read with no
    streak, their successes have nothing to reset and send no command; a failure among them,
    or a success whose record was not read for it, still writes."""
    health = EndpointHealth(repo, DISABLE_AFTER)
    clear = await _hook(repo)
    sent: list[str] = []
    count_commands(lambda command, _: sent.append(command))
    try:
        read_clear = AttemptResult(clear, True, T0, streak_known_clear=True)
        await health.record([read_clear, read_clear], T0)
        assert sent == []
        await health.record([_ok(clear, T0)], T0)  # not read for it: the reset is sent
        assert sent == ["update"]
    finally:
        count_commands(None)
    await health.record([read_clear, _fail(clear, T0 + SECOND)], T0 + SECOND)
    stored = await _stored(repo, clear)
    assert (stored["failing_since"], stored["consecutive_failures"]) == (_ms(T0 + SECOND), 1)
