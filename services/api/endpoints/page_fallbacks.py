"""The HTML 404 page for every other path under the public pass URLs (`/p/`, `/l/`, `/b/`): a
truncated or mangled link from an email (`/p/`, `/p/ab/cd` from a decoded `%2F`) is a holder's
link too, and gets the page, not the API's JSON (docs/pages.md). Included after every other
router, so it answers only what none of them serves.
"""

from fastapi import APIRouter
from fastapi.responses import Response

from services.api.deps import ContextDep
from services.api.pages.responses import not_found_response

router = APIRouter(tags=["public"], include_in_schema=False)


@router.get("/p/{rest:path}")
@router.head("/p/{rest:path}")
@router.get("/l/{rest:path}")
@router.head("/l/{rest:path}")
@router.get("/b/{rest:path}")
@router.head("/b/{rest:path}")
async def unknown_page(ctx: ContextDep, rest: str) -> Response:
    return not_found_response(ctx)
