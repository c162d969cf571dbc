"""/healthz (the process is alive) and /readyz (its NATS and MongoDB connections work, and
whatever else the service checks; `details` add what an operator should know either way, such
as the issuer's signing certificates and their ends)."""

from collections.abc import Awaitable, Callable, Mapping

from fastapi import APIRouter
from fastapi.responses import JSONResponse

Check = Callable[[], Awaitable[None]]
Detail = Callable[[], object]


def health_router(
    checks: Mapping[str, Check], details: Mapping[str, Detail] | None = None
) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> JSONResponse:
        results: dict[str, str] = {}
        for name, check in checks.items():
            try:
                await check()
                results[name] = "ok"
            except Exception as exc:  # a failed dependency is the answer here, not an error
                results[name] = f"failed: {type(exc).__name__}"
        ready = all(value == "ok" for value in results.values())
        body: dict[str, object] = {"ready": ready, "checks": results}
        if details:
            body["details"] = {name: detail() for name, detail in details.items()}
        return JSONResponse(body, status_code=200 if ready else 503)

    return router
