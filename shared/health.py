"""/healthz (the process is alive) and /readyz (its NATS and MongoDB connections work, and
whatever else the service checks; `details` add what an operator should know either way, such
as the issuer's signing certificates and their ends).

Each check has `CHECK_SECONDS` to answer, and they run at once: a store that is down made the
MongoDB ping wait out the driver's server selection (30 s), so /readyz hung instead of
answering 503, holding a connection per probe."""

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from fastapi import APIRouter
from fastapi.responses import JSONResponse

Check = Callable[[], Awaitable[None]]
Detail = Callable[[], object]
CHECK_SECONDS = 2.0


async def _outcome(check: Check, seconds: float) -> str:
    try:
        await asyncio.wait_for(check(), seconds)
    except TimeoutError:
        return f"failed: no answer in {seconds:g} s"
    except Exception as exc:  # a failed dependency is the answer here, not an error
        return f"failed: {type(exc).__name__}"
    return "ok"


def health_router(
    checks: Mapping[str, Check],
    details: Mapping[str, Detail] | None = None,
    check_seconds: float = CHECK_SECONDS,
) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> JSONResponse:
        outcomes = await asyncio.gather(
            *(_outcome(check, check_seconds) for check in checks.values())
        )
        results = dict(zip(checks, outcomes, strict=True))
        ready = all(value == "ok" for value in results.values())
        body: dict[str, object] = {"ready": ready, "checks": results}
        if details:
            body["details"] = {name: detail() for name, detail in details.items()}
        return JSONResponse(body, status_code=200 if ready else 503)

    return router
