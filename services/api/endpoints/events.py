"""/v1/events: recent lifecycle events across all passes of the account and mode."""

from typing import Annotated

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.api.deps import ContextDep, PrincipalDep
from services.api.endpoints.common import EventTypeQuery, paging
from services.api.objects import ListObject, PassEventObject, responses
from shared.pagination import PageRequest

router = APIRouter(prefix="/v1/events", tags=["events"])


@router.get(
    "",
    summary="List recent pass events, newest first",
    responses=responses(ListObject[PassEventObject], 400, 401, 403),
)
async def list_events(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("pass_event", 100, 200)],
    event_type: EventTypeQuery = None,
) -> JSONResponse:
    result = await ctx.events.page(
        principal.account_id, principal.mode, page, event_type=event_type
    )
    data = [PassEventObject.of(record) for record in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))
