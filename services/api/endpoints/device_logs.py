"""GET /admin/v1/device_logs: what Apple Wallet devices reported to POST {wallet_url}/v1/log.

Operator-only (like the rest of /admin/v1): devices log errors they met talking to the web
service (a bad pass, a refused registration), which are the best clue when an update does not
arrive. Newest first, kept seven days (docs/wallet-callbacks.md).
"""

from typing import Annotated

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.api.deps import AdminDep, ContextDep
from services.api.endpoints.common import paging
from services.api.objects import DeviceLogObject, ListObject
from shared.pagination import PageRequest

router = APIRouter(prefix="/admin/v1", tags=["admin"], dependencies=[AdminDep])


@router.get("/device_logs", summary="List the logs Apple Wallet devices sent, newest first")
async def list_device_logs(
    ctx: ContextDep, page: Annotated[PageRequest, paging("device_log", 100, 1000)]
) -> JSONResponse:
    result = await ctx.device_logs.page(page)
    data = [DeviceLogObject.of(log) for log in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))
