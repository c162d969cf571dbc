"""What /admin answers when TESSERA_ADMIN_TOKEN is unset: the operator API does not exist then
(404, absent from every OpenAPI document), but the 404 says why, so an operator who forgot the
token is not left guessing at a wrong URL."""

from fastapi import APIRouter, Request

from shared.errors import NotFound

router = APIRouter(include_in_schema=False)
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MESSAGE = (
    "Unrecognized request URL ({method} {path}): the operator API is off; "
    "set TESSERA_ADMIN_TOKEN to serve /admin."
)


@router.api_route("/admin", methods=METHODS)
@router.api_route("/admin/{rest:path}", methods=METHODS)
async def operator_api_off(request: Request) -> None:
    raise NotFound(
        MESSAGE.format(method=request.method, path=request.url.path), code="route_unknown"
    )
