"""Variant A: `POST /passes` with an `x-api-key` header (spec 2.8, 4.2, 5, 7, 9).

Answers 201 `{"apple", "google"}`: the URL that downloads the signed .pkpass and the Google
Wallet save link. Errors are `{"message"}` (see services/api/rendering.py). It records the same
`created` event as `POST /v1/passes`.
"""

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from services.api import variant_a
from services.api.deps import ContextDep, VariantAPrincipalDep
from services.api.endpoints.common import command_base
from services.api.objects import pass_urls
from services.api.schemas import StorableBody
from shared.design import Design
from shared.errors import InvalidRequest, NotFound
from shared.ids import has_prefix, new_id
from shared.messages import CreatePass

router = APIRouter(tags=["Variant A"])


class CreatePassRequest(StorableBody):
    # A misspelt or extra key is refused, never silently dropped (as in v1).
    model_config = ConfigDict(extra="forbid")

    templateId: StrictStr = Field(max_length=100)  # the wire name of spec 2.8
    data: dict[str, Any]


class CreatePassResponse(BaseModel):
    apple: str
    google: str


class ErrorMessage(BaseModel):
    message: str


_DECLARED = {
    201: {"model": CreatePassResponse, "description": "The pass was issued."},
    **{
        status: {"model": ErrorMessage, "description": description}
        for status, description in (
            (400, "Bad request"),
            (401, "Missing or invalid API key"),
            (404, "Unknown template"),
            (500, "Internal error"),
        )
    },
}


@router.post(
    "/passes",
    status_code=201,
    summary="Create a pass",
    operation_id="createPass",
    responses=_DECLARED,  # type: ignore[arg-type]  # FastAPI accepts int keys here
    openapi_extra={
        "security": [{"ApiKeyAuth": []}],
        # Declared required as spec 4.2 does; a missing key still answers 401, not 400.
        "parameters": [
            {"name": "x-api-key", "in": "header", "required": True, "schema": {"type": "string"}}
        ],
    },
)
async def create_pass(
    ctx: ContextDep, principal: VariantAPrincipalDep, body: CreatePassRequest
) -> JSONResponse:
    await ctx.reserve_pass(principal)
    template_id = body.templateId
    template = None
    if has_prefix(template_id, "template"):
        template = await ctx.issuer.template(principal.account_id, principal.mode, template_id)
    if template is None:
        raise NotFound(f"No such template: '{template_id}'")
    if template.require_download_link:
        # Its permanent URLs answer 404, and this answer has no pass id to make a link with.
        raise InvalidRequest(
            f"Template '{template_id}' requires a download link: issue its passes with "
            "POST /v1/passes, then POST /v1/passes/{id}/download_links.",
            code="download_link_required",
        )
    mapped = variant_a.map_data(Design.from_stored(template.design), body.data)
    checked = variant_a.checked_as_v1(template_id, mapped)
    command = CreatePass(
        **command_base(principal, new_id("command")),
        template_id=template_id,
        holder_email=checked.holder_email,
        holder_name=checked.holder_name,
        field_values=checked.field_values,
        metadata=checked.metadata,
        created_via_api=True,
    )
    record = await ctx.command(command)
    page_url, download_url = pass_urls(ctx.settings.site_url, record.short_id)
    # Tessera's redirect to the save link, signed when followed (docs/api-decisions.md). Without
    # Google credentials for live passes there is no Google link; `google` is required by the
    # contract, so it is the pass page, which offers what there is.
    google = page_url if record.google_save_url is None else f"{page_url}/google"
    return JSONResponse({"apple": download_url, "google": google}, 201)
