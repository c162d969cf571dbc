"""/healthz (the process is alive) and /readyz (its NATS and MongoDB connections work)."""

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse

Check = Callable[[], Awaitable[None]]


def health_router(checks: dict[str, Check]) -> APIRouter:
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
        return JSONResponse({"ready": ready, "checks": results}, status_code=200 if ready else 503)

    return router
