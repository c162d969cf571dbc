"""The api's Idempotency-Key rules (services/api/idempotency.py `execute`) against the real store,
below HTTP: a replay answers the stored response, another body under the key is a 409, a key
whose request still runs is a 409 until its lock expires and then is taken over under the same
command id, and 402/429 refusals store nothing. The whole stack: tests/e2e/test_idempotency.py."""

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.responses import JSONResponse

from services.api.idempotency import (
    MAX_KEY_LENGTH,
    Admission,
    IdempotencyPolicy,
    Scope,
    execute,
    fingerprint,
    first_to,
)
from services.api.repository import ApiRepository
from shared.clock import SystemClock
from shared.errors import (
    ApiError,
    BillingError,
    IdempotencyConflict,
    InternalError,
    InvalidRequest,
    NotFound,
    RateLimited,
)
from shared.mongo import create_client
from tests.support.inproc_api import ManualClock

SCOPE = Scope("acct_idem", "test")
LOCK = timedelta(seconds=15)
BODY = fingerprint("POST", "/v1/passes", {"template_id": "tmpl_1"})


class Action:
    """A command stand-in that records the command ids it ran under and answers in turn what
    it was given: a (status, body) or an ApiError to raise."""

    def __init__(self, *outcomes: tuple[int, Any] | ApiError) -> None:
        self.outcomes = list(outcomes)
        self.command_ids: list[str] = []

    async def __call__(self, command_id: str) -> tuple[int, Any]:
        self.command_ids.append(command_id)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome


@pytest.fixture
async def policy(mongo_url: str) -> AsyncIterator[IdempotencyPolicy]:
    """The api's policy on a database of the test's own, with a clock the test moves."""
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = ApiRepository(db)
    await repo.ensure_indexes()
    try:
        yield IdempotencyPolicy(repo=repo, clock=ManualClock(), ttl=timedelta(hours=24), lock=LOCK)
    finally:
        await client.drop_database(db.name)
        await client.close()


def _body(response: JSONResponse) -> Any:
    return json.loads(bytes(response.body))


def _replayed(response: JSONResponse) -> bool:
    return response.headers.get("Idempotent-Replayed") == "true"


def _advance(policy: IdempotencyPolicy, seconds: float) -> None:
    assert isinstance(policy.clock, ManualClock)
    policy.clock.advance(seconds)


async def test_a_replay_answers_the_stored_response_without_running_again(
    policy: IdempotencyPolicy,
) -> None:
    action = Action((200, {"id": "pass_1"}))
    first = await execute(policy, SCOPE, "order-1", BODY, action)
    again = await execute(policy, SCOPE, "order-1", BODY, action)

    assert (first.status_code, _body(first), _replayed(first)) == (200, {"id": "pass_1"}, False)
    assert (again.status_code, _body(again), _replayed(again)) == (200, {"id": "pass_1"}, True)
    assert len(action.command_ids) == 1


async def test_a_4xx_outcome_is_stored_and_replayed(policy: IdempotencyPolicy) -> None:
    action = Action(NotFound("No such template: 'tmpl_1'.", param="template_id"))
    with pytest.raises(NotFound):
        await execute(policy, SCOPE, "missing", BODY, action)
    again = await execute(policy, SCOPE, "missing", BODY, action)

    assert (again.status_code, _replayed(again)) == (404, True)
    assert _body(again)["error"]["param"] == "template_id"
    assert len(action.command_ids) == 1


async def test_the_key_with_another_body_is_a_409(policy: IdempotencyPolicy) -> None:
    action = Action((200, {"id": "pass_1"}))
    await execute(policy, SCOPE, "order-1", BODY, action)
    other = fingerprint("POST", "/v1/passes", {"template_id": "tmpl_2"})
    with pytest.raises(IdempotencyConflict) as conflict:
        await execute(policy, SCOPE, "order-1", other, action)
    assert conflict.value.code == "idempotency_key_reused"
    assert len(action.command_ids) == 1


async def test_keys_belong_to_their_account_and_mode(policy: IdempotencyPolicy) -> None:
    action = Action((200, {"n": 1}), (200, {"n": 2}), (200, {"n": 3}))
    for scope in (SCOPE, Scope("acct_idem", "live"), Scope("acct_other", "test")):
        response = await execute(policy, scope, "shared-key", BODY, action)
        assert not _replayed(response)
    assert len(set(action.command_ids)) == 3


async def test_a_running_request_holds_its_key_until_its_lock_expires_then_is_taken_over(
    policy: IdempotencyPolicy,
) -> None:
    """A request whose api replica died mid-command leaves its key `processing`: a retry is
    told to wait while the lock lasts, then takes the key over and re-sends the same command,
    which its owner answers without a second side effect."""
    started, stuck = asyncio.Event(), asyncio.Event()
    first_ids: list[str] = []

    async def never_answers(command_id: str) -> tuple[int, Any]:
        first_ids.append(command_id)
        started.set()
        await stuck.wait()
        raise AssertionError("the first request never finishes")

    first = asyncio.create_task(execute(policy, SCOPE, "order-1", BODY, never_answers))
    await started.wait()
    retry = Action((200, {"id": "pass_1"}))
    with pytest.raises(IdempotencyConflict) as in_progress:
        await execute(policy, SCOPE, "order-1", BODY, retry)
    assert in_progress.value.code == "idempotency_request_in_progress"

    _advance(policy, LOCK.total_seconds() + 1)
    taken_over = await execute(policy, SCOPE, "order-1", BODY, retry)
    assert (taken_over.status_code, _body(taken_over)) == (200, {"id": "pass_1"})
    assert retry.command_ids == first_ids  # the same command, sent again
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    # The stored answer outlives the first request's end.
    assert _replayed(await execute(policy, SCOPE, "order-1", BODY, retry))


async def test_only_one_retry_takes_over_an_expired_lock(policy: IdempotencyPolicy) -> None:
    stale = policy.clock.now()
    record = {"_id": "k", "state": "processing", "locked_until": stale}
    assert await policy.repo.claim_idempotency(record) is None
    later = stale + LOCK
    wins = await asyncio.gather(
        *(policy.repo.take_over_idempotency("k", stale, later) for _ in range(5))
    )
    assert sorted(wins) == [False, False, False, False, True]


async def test_a_5xx_releases_the_key_and_the_retry_resends_the_same_command(
    policy: IdempotencyPolicy,
) -> None:
    action = Action(InternalError("The issuer did not answer.", code="timeout"), (200, {"n": 1}))
    with pytest.raises(InternalError):
        await execute(policy, SCOPE, "order-1", BODY, action)
    retried = await execute(policy, SCOPE, "order-1", BODY, action)

    assert (retried.status_code, _replayed(retried)) == (200, False)
    assert action.command_ids[0] == action.command_ids[1]


async def test_a_retry_that_takes_a_key_over_gets_what_the_first_run_admitted(
    policy: IdempotencyPolicy,
) -> None:
    """The first run reserved (a batch: how many rows the quota admitted) and then timed out:
    the retry does not reserve again, it is told what the first run kept; a replay of the
    finished request is told nothing."""
    reserved: list[int] = []
    told: list[Any] = []

    async def reserve() -> int:
        reserved.append(7)
        return 7

    async def reserved_before(kept: Any) -> None:
        told.append(kept)

    admission = Admission(reserve, reserved_before)
    action = Action(InternalError("The issuer did not answer.", code="timeout"), (200, {"n": 1}))
    with pytest.raises(InternalError):
        await execute(policy, SCOPE, "order-1", BODY, action, admit=admission)
    retried = await execute(policy, SCOPE, "order-1", BODY, action, admit=admission)
    replayed = await execute(policy, SCOPE, "order-1", BODY, action, admit=admission)

    assert (retried.status_code, _replayed(retried), _replayed(replayed)) == (200, False, True)
    assert (reserved, told) == ([7], [7])


async def test_what_a_run_did_once_a_retry_that_takes_the_key_over_does_not_do_again(
    policy: IdempotencyPolicy,
) -> None:
    """A batch gave its refused rows' quota units back, then failed (its key's record could
    not be finished): the retry gets the same rows refused again and must not give their
    units back a second time. Without a key every request is its own."""
    given_back: list[str] = []
    failures = [InternalError("The store did not answer.", code="service_unavailable")]

    async def action(command_id: str) -> tuple[int, Any]:
        if await first_to(policy, "release"):
            given_back.append(command_id)
        if failures:
            raise failures.pop()
        return 200, {"ok": True}

    with pytest.raises(InternalError):
        await execute(policy, SCOPE, "order-1", BODY, action)
    retried = await execute(policy, SCOPE, "order-1", BODY, action)
    assert (retried.status_code, _replayed(retried)) == (200, False)
    assert len(given_back) == 1
    await execute(policy, SCOPE, None, BODY, action)
    await execute(policy, SCOPE, None, BODY, action)
    assert len(given_back) == 3


async def test_a_402_before_the_command_stores_nothing(policy: IdempotencyPolicy) -> None:
    """The quota refused: the key starts afresh once the quota allows, as a new command."""
    refusals = [BillingError("Monthly pass quota reached.", code="quota_exceeded")]

    async def admit() -> None:
        if refusals:
            raise refusals.pop()

    action = Action((200, {"id": "pass_1"}))
    with pytest.raises(BillingError):
        await execute(policy, SCOPE, "order-1", BODY, action, admit=Admission(admit))
    assert action.command_ids == []
    admitted = await execute(policy, SCOPE, "order-1", BODY, action, admit=Admission(admit))

    assert (admitted.status_code, _replayed(admitted)) == (200, False)
    assert len(action.command_ids) == 1


async def test_a_429_is_not_stored_and_the_same_key_runs_again(
    policy: IdempotencyPolicy,
) -> None:
    limited = RateLimited("Too many requests.", code="rate_limited")
    action = Action(limited, (200, {"id": "pass_1"}))
    with pytest.raises(RateLimited):
        await execute(policy, SCOPE, "order-1", BODY, action)
    allowed = await execute(policy, SCOPE, "order-1", BODY, action)

    assert (allowed.status_code, _body(allowed), _replayed(allowed)) == (
        200,
        {"id": "pass_1"},
        False,
    )
    assert len(action.command_ids) == 2


async def test_a_replay_skips_the_quota_and_a_redacted_body_is_what_is_stored(
    policy: IdempotencyPolicy,
) -> None:
    admitted: list[str] = []

    async def admit() -> None:
        admitted.append("unit")

    def redact(body: Any) -> Any:
        return {**body, "secret": "[redacted]"}

    action = Action((201, {"id": "acct_1", "secret": "svc_test_x"}))
    first = await execute(policy, SCOPE, "k", BODY, action, redact=redact, admit=Admission(admit))
    again = await execute(policy, SCOPE, "k", BODY, action, redact=redact, admit=Admission(admit))

    assert _body(first) == {"id": "acct_1", "secret": "svc_test_x"}
    assert (again.status_code, _body(again)) == (201, {"id": "acct_1", "secret": "[redacted]"})
    assert admitted == ["unit"]


@pytest.mark.parametrize("key", ["", "k" * (MAX_KEY_LENGTH + 1)])
async def test_a_key_of_the_wrong_length_is_refused_with_its_param(
    policy: IdempotencyPolicy, key: str
) -> None:
    action = Action((200, {}))
    with pytest.raises(InvalidRequest) as refused:
        await execute(policy, SCOPE, key, BODY, action)
    assert refused.value.param == "Idempotency-Key"
    assert action.command_ids == []


async def test_a_request_that_runs_longer_than_its_lock_keeps_its_key(
    policy: IdempotencyPolicy,
) -> None:
    """An import sends up to a hundred commands and outlives the lock a command needs: the lock
    is renewed while it runs, so a retry (`tessera import` run again) is told to wait instead of
    taking the key over and running the same upload beside it."""
    short = IdempotencyPolicy(
        repo=policy.repo, clock=SystemClock(), ttl=policy.ttl, lock=timedelta(seconds=0.6)
    )
    started, release = asyncio.Event(), asyncio.Event()

    async def long_import(command_id: str) -> tuple[int, Any]:
        started.set()
        await release.wait()
        return 202, {"id": "job_1"}

    first = asyncio.create_task(execute(short, SCOPE, "import-1", BODY, long_import))
    await started.wait()
    record = await policy.repo._idempotency.find_one({})
    assert record is not None
    first_lock = record["locked_until"]

    async def renewed_past_the_first_lock() -> bool:
        now = SystemClock().now()
        current = await policy.repo._idempotency.find_one({"_id": record["_id"]})
        return now > first_lock and current is not None and current["locked_until"] > now

    async with asyncio.timeout(10):
        while True:
            if await renewed_past_the_first_lock():
                break
            await asyncio.sleep(0.05)
    retry = Action((202, {"id": "job_2"}))
    with pytest.raises(IdempotencyConflict) as in_progress:
        await execute(short, SCOPE, "import-1", BODY, retry)
    assert in_progress.value.code == "idempotency_request_in_progress"
    release.set()
    assert _body(await first) == {"id": "job_1"}
    assert retry.command_ids == []
