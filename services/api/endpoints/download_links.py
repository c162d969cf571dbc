"""POST /v1/passes/:id/download-links: expiring links (spec 2.3, 4.1 rules 3-5).

The token (`pdl_` + 192 random bits) is made here and shown once; only its SHA-256 goes to the
issuer and into MongoDB. A replay with the same Idempotency-Key answers the same link object
with `url` "[redacted]": the token is not kept anywhere it could be shown again.
"""

import hashlib
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.deps import ApiContext, ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import require_id
from services.api.idempotency import Scope, execute, fingerprint
from services.api.objects import DownloadLinkObject, responses
from services.api.schemas import DownloadLinkCreate, download_link_object
from shared.ids import new_id, random_token
from shared.logs import request_id_var
from shared.messages import CreateDownloadLink, issuer_subject
from shared.models import DownloadLinkRecord

router = APIRouter(prefix="/v1/passes", tags=["passes"])
REDACTED = "[redacted]"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def _mint(
    ctx: ApiContext, principal: Principal, pass_id: str, expires_in: int, command_id: str
) -> dict[str, Any]:
    token = random_token("download_link")
    now = ctx.clock.now()
    command = CreateDownloadLink(
        command_id=command_id,
        account_id=principal.account_id,
        mode=principal.mode,
        request_id=request_id_var.get(),
        pass_id=pass_id,
        token_hash=token_hash(token),
        expires_in=expires_in,
        created_at=now,
        expires_at=now + timedelta(seconds=expires_in),
    )
    record = DownloadLinkRecord.model_validate(
        await ctx.command(issuer_subject(command.type), command)
    )
    if record.token_hash != command.token_hash:
        # A retry of a command whose first attempt committed: that link's token is unknown
        # here (it was never stored), so it is unreachable; mint a new one instead.
        return await _mint(ctx, principal, pass_id, expires_in, new_id("command"))
    return download_link_object(record, f"{ctx.settings.site_url}/l/{token}")


@router.post(
    "/{pass_id}/download-links",
    summary="Mint an expiring download link",
    responses=responses(DownloadLinkObject, 400, 401, 403, 404, 409, 500),
)
async def create_download_link(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    pass_id: str,
    body: Annotated[DownloadLinkCreate | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(pass_id, "pass", "pass")
    expires_in = (body or DownloadLinkCreate()).expires_in

    async def action(command_id: str) -> tuple[int, Any]:
        return 200, await _mint(ctx, principal, pass_id, expires_in, command_id)

    return await execute(
        ctx.idempotency,
        Scope.of(principal),
        idempotency_key,
        fingerprint(request.method, request.url.path, {"expires_in": expires_in}),
        action,
        redact=lambda link: {**link, "url": REDACTED},
    )
