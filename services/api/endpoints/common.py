"""Pieces every endpoint uses: answering idempotently, sending commands, list paging, id checks."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator

from services.api.accounts import Principal
from services.api.deps import ApiContext
from services.api.idempotency import Admission, Scope, execute, fingerprint
from shared.errors import InvalidRequest, not_found
from shared.ids import has_prefix
from shared.logs import request_id_var
from shared.messages import Command, PassEventType, R
from shared.pagination import PageRequest

BodyT = TypeVar("BodyT", bound=BaseModel)
_QUERY_BOOLS = {"true": True, "1": True, "false": False, "0": False}


def _query_bool(value: Any) -> Any:
    """A query string's boolean: `true`/`false` (any case) or `1`/`0`, and nothing else (a
    plain `bool` also took `yes`, `on`, `t`, `y`... against the documented values)."""
    if isinstance(value, str) and value.lower() in _QUERY_BOOLS:
        return _QUERY_BOOLS[value.lower()]
    raise ValueError("must be true or false (or 1 or 0)")


QueryBool = Annotated[bool, BeforeValidator(_query_bool)]

# `?type=` on the event lists: one of the event types, indexed with the account and mode.
EventTypeQuery = Annotated[
    PassEventType | None, Query(alias="type", description="Only events of this type.")
]


def command_base(principal: Principal, command_id: str) -> dict[str, Any]:
    """The fields every command carries: who asks, in which mode, under which command id."""
    return {
        "command_id": command_id,
        "account_id": principal.account_id,
        "mode": principal.mode,
        # The request id travels with the command so the owner's log lines carry it too.
        "request_id": request_id_var.get(),
    }


async def idempotent_response(
    ctx: ApiContext,
    scope: Scope,
    request: Request,
    key: str | None,
    body: Any,
    produce: Callable[[str], Awaitable[BaseModel]],
    *,
    status: int = 200,
    admit: Admission | None = None,
    redact: Callable[[Any], Any] | None = None,
) -> JSONResponse:
    """Answer what `produce(command_id)` makes, under the Idempotency-Key rules (idempotency.py):
    the one way every POST and PATCH of the api runs. `body` is what the request fingerprint is
    computed from (the validated request body). `admit` (the pass quota) reserves only before a
    command's first run, so neither a replay nor a retry after a timeout costs a second unit;
    `redact` gives the copy of the answer stored for replays when it holds a secret."""

    async def action(command_id: str) -> tuple[int, Any]:
        return status, (await produce(command_id)).model_dump(mode="json")

    request_fingerprint = fingerprint(request.method, request.url.path, body)
    return await execute(
        ctx.idempotency, scope, key, request_fingerprint, action, redact=redact, admit=admit
    )


async def send_command(
    ctx: ApiContext,
    principal: Principal,
    request: Request,
    key: str | None,
    body: Any,
    make: Callable[[dict[str, Any]], Command[R]],
    shape: Callable[[R], BodyT],
    *,
    admit: Admission | None = None,
    redact: Callable[[Any], Any] | None = None,
) -> JSONResponse:
    """Send the command `make(command_base(...))` to its owner idempotently and answer its
    typed result as shaped by `shape`."""

    async def produce(command_id: str) -> BodyT:
        return shape(await ctx.command(make(command_base(principal, command_id))))

    scope = Scope.of(principal)
    return await idempotent_response(
        ctx, scope, request, key, body, produce, admit=admit, redact=redact
    )


def require_id(value: str, kind: str, label: str) -> str:
    """An id with the wrong prefix names nothing: 404 without a database query."""
    if not has_prefix(value, kind):
        raise not_found(label, value)
    return value


async def require_pass(ctx: ApiContext, principal: Principal, pass_id: str) -> None:
    """404 unless `pass_id` names a pass of the principal's account and mode (a pass's
    sub-resources: its events, its scans)."""
    require_id(pass_id, "pass", "pass")
    if await ctx.issuer.pass_(principal.account_id, principal.mode, pass_id) is None:
        raise not_found("pass", pass_id)


def paging(kind: str, default: int, maximum: int) -> Any:
    """A dependency for `limit`, `starting_after` and `ending_before` on a list of `kind`."""

    async def page(
        limit: Annotated[int, Query(ge=1, le=maximum, description=f"1 to {maximum}.")] = default,
        starting_after: Annotated[str | None, Query(description="Cursor: an object id.")] = None,
        ending_before: Annotated[str | None, Query(description="Cursor: an object id.")] = None,
    ) -> PageRequest:
        if starting_after is not None and ending_before is not None:
            raise InvalidRequest(
                "Send starting_after or ending_before, not both.",
                param="ending_before",
                code="parameter_invalid",
            )
        for name, cursor in (("starting_after", starting_after), ("ending_before", ending_before)):
            if cursor is not None and not has_prefix(cursor, kind):
                raise InvalidRequest(
                    f"{name} must be an id of a {kind}.", param=name, code="parameter_invalid"
                )
        return PageRequest(limit=limit, starting_after=starting_after, ending_before=ending_before)

    return Depends(page)
