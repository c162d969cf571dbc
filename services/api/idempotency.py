"""Idempotency-Key handling for every POST and PATCH (spec 8).

The first request with a key claims a record (state `processing`, with a lock that outlives
the command timeout) and a `command_id`. The command carries that id to the owning service,
which stores its result under it, so re-running the command after a crash or a timeout returns
the first result instead of writing twice. Outcomes:
- same key, same body, finished: the stored status and body, with `Idempotent-Replayed: true`
  (secrets in it, such as new API keys, are stored and replayed as "[redacted]");
- same key, different body: 409 idempotency_error;
- same key while the first request still runs: 409 idempotency_error (code
  `idempotency_request_in_progress`); retry after it finishes;
- the first request failed with a 5xx or timed out: the lock is released and a retry re-sends
  the same command, which the owning service answers without a second side effect;
- the first request was refused before anything ran (402 quota, 429 rate): nothing is stored,
  so the same key works once the quota or the window allows it.
Records expire after 24 hours through a TTL index.
"""

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.repository import ApiRepository
from shared.clock import Clock
from shared.errors import ApiError, IdempotencyConflict, InvalidRequest
from shared.ids import new_id
from shared.redaction import REFS

log = logging.getLogger(__name__)

MAX_KEY_LENGTH = 255
REDACTED = "[redacted]"
# Refusals that say "not now" rather than "not this request": the key stays usable.
NOT_STORED = frozenset({402, 429})
Action = Callable[[str], Awaitable[tuple[int, Any]]]


@dataclass(frozen=True)
class Admission:
    """What a request reserves before its command's first run (the pass quota), and what a
    retry does instead when it takes over a key whose first run ended with an unknown outcome
    (a timeout, a 5xx): that run's reservation stands, so the passes are counted once whether
    or not they exist yet. `first()` reserves and answers what such a retry must know (kept in
    the key's record; None: nothing to keep); `again(kept)` gets it back (None too when the
    first run stopped before it was kept)."""

    first: Callable[[], Awaitable[Any]]
    again: Callable[[Any], Awaitable[None]] | None = None


# The key's record of the request whose action is running in this task (None: no key).
_RUNNING: ContextVar[str | None] = ContextVar("idempotency_record", default=None)


async def first_to(policy: "IdempotencyPolicy", what: str) -> bool:
    """Whether this run of the request is the first to do `what` under its Idempotency-Key:
    marked in the key's record, so that a retry taking the key over after a timeout or a 5xx,
    which gets the same command result again, does not do it twice (give quota units back,
    say). Mark first, then do: a crash between the two leaves it undone, never done twice.
    True without a key (a request without one is never run twice)."""
    record_id = _RUNNING.get()
    if record_id is None:
        return True
    return await policy.repo.mark_once(record_id, what)


@dataclass(frozen=True)
class IdempotencyPolicy:
    repo: ApiRepository
    clock: Clock
    ttl: timedelta
    lock: timedelta


def without_keys(body: Any) -> Any:
    """Keys are shown once: the copy of an answer kept for replays holds none (`api_keys` of
    a new account, `key` of a new API or scanner key)."""
    redacted = dict(body)
    if "api_keys" in redacted:
        redacted["api_keys"] = dict.fromkeys(redacted["api_keys"], REDACTED)
    if "key" in redacted:
        redacted["key"] = REDACTED
    return redacted


def fingerprint(method: str, path: str, body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


@dataclass(frozen=True)
class Scope:
    """Whose keys these are: an account and mode, or the operator (account "operator")."""

    account_id: str
    mode: str

    @classmethod
    def of(cls, principal: Principal) -> "Scope":
        return cls(principal.account_id, principal.mode)


OPERATOR = Scope("operator", "admin")


def _record_id(scope: Scope, key: str) -> str:
    return hashlib.sha256(f"{scope.account_id}|{scope.mode}|{key}".encode()).hexdigest()


def _response(status: int, body: Any, replayed: bool = False) -> JSONResponse:
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return JSONResponse(body, status_code=status, headers=headers)


async def execute(
    policy: IdempotencyPolicy,
    scope: Scope,
    key: str | None,
    request_fingerprint: str,
    action: Action,
    redact: Callable[[Any], Any] | None = None,
    admit: Admission | None = None,
) -> JSONResponse:
    """Run `action` under the key's rules. `redact` gives the copy of a success body to store
    when the body holds a secret (a new API key), so no secret is kept for replays.

    `admit` (the pass quota) reserves before the command's first run only (see `Admission`)."""
    if key is None:
        if admit is not None:
            await admit.first()
        return _response(*await action(new_id("command")))
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters.",
            param="Idempotency-Key",
            code="parameter_invalid",
        )
    record_id = _record_id(scope, key)
    now = policy.clock.now()
    locked_until = _as_stored(now + policy.lock)
    command_id = new_id("command")
    existing = await policy.repo.claim_idempotency(
        {
            "_id": record_id,
            "account_id": scope.account_id,
            "mode": scope.mode,
            "fingerprint": request_fingerprint,
            "command_id": command_id,
            "state": "processing",
            REFS: [],
            "locked_until": locked_until,
            "created_at": now,
            "expires_at": now + policy.ttl,
        }
    )
    if existing is not None:
        if existing["fingerprint"] != request_fingerprint:
            raise IdempotencyConflict(
                "This Idempotency-Key was already used with a different request body.",
                code="idempotency_key_reused",
            )
        if existing["state"] == "done":
            return _response(existing["response_status"], existing["response_body"], True)
        in_progress = IdempotencyConflict(
            "A request with this Idempotency-Key is still being processed; retry shortly.",
            code="idempotency_request_in_progress",
        )
        if existing["locked_until"] > now:
            raise in_progress
        if not await policy.repo.take_over_idempotency(
            record_id, existing["locked_until"], locked_until
        ):
            raise in_progress
        command_id = existing["command_id"]
        if admit is not None and admit.again is not None:
            await admit.again(existing.get("admitted"))
    elif admit is not None:
        try:
            admitted = await admit.first()
        except BaseException:
            # Refused (402) before anything ran: the same key works once the quota allows.
            await policy.repo.forget_idempotency(record_id, command_id)
            raise
        if admitted is not None:
            await policy.repo.keep_admission(record_id, admitted)
    running = _RUNNING.set(record_id)
    # An import runs many commands, longer than the lock a command needs: the lock is renewed
    # while the request runs, so no retry takes the key over from a request that is alive.
    keeper = asyncio.create_task(_keep_locked(policy, record_id, locked_until))
    try:
        try:
            status, body = await action(command_id)
        finally:
            keeper.cancel()  # before the outcome is written: a renewal never lands after it
    except ApiError as exc:
        if exc.status >= 500 or exc.status in NOT_STORED:
            await policy.repo.release_idempotency(record_id, policy.clock.now())
            raise
        await policy.repo.finish_idempotency(
            record_id, scope.account_id, exc.status, exc.envelope()
        )
        raise
    except BaseException:
        await policy.repo.release_idempotency(record_id, policy.clock.now())
        raise
    finally:
        _RUNNING.reset(running)
    stored = redact(body) if redact else body
    await policy.repo.finish_idempotency(record_id, scope.account_id, status, stored)
    return _response(status, body)


async def _keep_locked(policy: IdempotencyPolicy, record_id: str, until: datetime) -> None:
    """Renew the key's lock every third of its length while the request runs (nothing is
    written for a request shorter than that: every ordinary one). Each renewal applies only to
    the lock as this request last set it, so one still in flight when the request ends cannot
    undo the release of its key (a timed-out request's retry must find the key free)."""
    every = policy.lock.total_seconds() / 3
    while True:
        await asyncio.sleep(every)
        renewed = _as_stored(policy.clock.now() + policy.lock)
        try:
            if not await policy.repo.take_over_idempotency(record_id, until, renewed):
                return
        except Exception:
            log.warning("the lock of an Idempotency-Key was not renewed", exc_info=True)
            continue
        until = renewed


def _as_stored(moment: datetime) -> datetime:
    """`moment` as the store keeps it (milliseconds), so it can be matched exactly later."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
