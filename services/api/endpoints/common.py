"""Pieces every v1 endpoint uses: running a command idempotently, list paging, id checks."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.deps import ApiContext
from services.api.idempotency import Scope, execute, fingerprint
from shared.errors import InvalidRequest, not_found
from shared.ids import has_prefix
from shared.logs import request_id_var
from shared.messages import Command, issuer_subject
from shared.pagination import PageRequest

CommandT = TypeVar("CommandT", bound=Command)


async def run_command(
    ctx: ApiContext,
    principal: Principal,
    idempotency_key: str | None,
    request: Request,
    body: Any,
    command_type: type[CommandT],
    fields: dict[str, Any],
    shape: Callable[[dict[str, Any]], dict[str, Any]],
    admit: Callable[[], Awaitable[None]] | None = None,
) -> JSONResponse:
    """Send a `command_type` command with `fields` to the issuer, under the idempotency rules.

    `body` is what the request fingerprint is computed from (the validated request body).
    `admit` (the pass quota) runs only before a command's first run, so neither a replay of a
    stored result nor a retry of a command that timed out costs a second unit."""

    async def action(command_id: str) -> tuple[int, Any]:
        command = command_type(
            command_id=command_id,
            account_id=principal.account_id,
            mode=principal.mode,
            # The request id travels with the command so the owner's log lines carry it too.
            request_id=request_id_var.get(),
            **fields,
        )
        subject = issuer_subject(command_type.model_fields["type"].default)
        return 200, shape(await ctx.command(subject, command))

    request_fingerprint = fingerprint(request.method, request.url.path, body)
    scope = Scope.of(principal)
    return await execute(
        ctx.idempotency, scope, idempotency_key, request_fingerprint, action, admit=admit
    )


def require_id(value: str, kind: str, label: str) -> str:
    """An id with the wrong prefix names nothing: 404 without a database query."""
    if not has_prefix(value, kind):
        raise not_found(label, value)
    return value


def paging(kind: str, default: int, maximum: int) -> Any:
    """A dependency for `limit`, `starting_after` and `ending_before` on a list of `kind`."""

    async def page(
        limit: Annotated[int, Query(ge=1, le=maximum, description=f"1 to {maximum}.")] = default,
        starting_after: Annotated[str | None, Query(description="Cursor: an object id.")] = None,
        ending_before: Annotated[str | None, Query(description="Cursor: an object id.")] = None,
    ) -> PageRequest:
        if starting_after is not None and ending_before is not None:
            raise InvalidRequest(
                "Send starting_after or ending_before, not both.", param="ending_before"
            )
        for name, cursor in (("starting_after", starting_after), ("ending_before", ending_before)):
            if cursor is not None and not has_prefix(cursor, kind):
                raise InvalidRequest(f"{name} must be an id of a {kind}.", param=name)
        return PageRequest(limit=limit, starting_after=starting_after, ending_before=ending_before)

    return Depends(page)
