"""POST /v1/passes/:id/download-links: expiring links (spec 2.3, 4.1 rules 3-5).

The token (`pdl_` + 192 random bits) is made here and shown once; only its SHA-256 goes to the
issuer and into MongoDB. A replay with the same Idempotency-Key answers the same link object
with `url` "[redacted]": the token is not kept anywhere it could be shown again.
"""

import hashlib
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.deps import ApiContext, ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import command_base, idempotent_response, require_id
from services.api.idempotency import REDACTED, Scope
from services.api.objects import DownloadLinkObject, responses
from services.api.schemas import DownloadLinkCreate
from shared.ids import new_id, random_token
from shared.messages import CreateDownloadLink

router = APIRouter(prefix="/v1/passes", tags=["passes"])


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def _mint(
    ctx: ApiContext, principal: Principal, pass_id: str, expires_in: int, command_id: str
) -> DownloadLinkObject:
    token = random_token("download_link")
    now = ctx.clock.now()
    command = CreateDownloadLink(
        **command_base(principal, command_id),
        pass_id=pass_id,
        token_hash=token_hash(token),
        expires_in=expires_in,
        created_at=now,
        expires_at=now + timedelta(seconds=expires_in),
    )
    record = await ctx.command(command)
    if record.token_hash != command.token_hash:
        # A retry of a command whose first attempt committed: that link's token is unknown
        # here (it was never stored), so it is unreachable; mint a new one instead.
        return await _mint(ctx, principal, pass_id, expires_in, new_id("command"))
    return DownloadLinkObject.of(record, f"{ctx.settings.site_url}/l/{token}")


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

    async def mint(command_id: str) -> DownloadLinkObject:
        return await _mint(ctx, principal, pass_id, expires_in, command_id)

    return await idempotent_response(
        ctx,
        Scope.of(principal),
        request,
        idempotency_key,
        {"expires_in": expires_in},
        mint,
        redact=lambda link: {**link, "url": REDACTED},
    )
