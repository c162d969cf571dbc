"""The one place errors become responses: the spec's envelope, for every failure.

Validation errors are 400 (never 422) with `param` = the dotted path of the offending field;
unknown routes are 404 and wrong methods 405, in the same envelope; anything unexpected is a
500 api_error that says nothing about internals.
"""

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pymongo.errors import ConnectionFailure
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from services.api.deps import authenticate_unread_body
from services.api.rendering import error_body
from shared.errors import ApiError, InternalError, InvalidRequest, MethodNotAllowed, NotFound
from shared.validation_messages import client_message, dotted_path

log = logging.getLogger(__name__)
_SOURCES = {"body", "query", "path", "header", "cookie"}
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def error_response(
    request: Request, error: ApiError, headers: dict[str, str] | None = None
) -> JSONResponse:
    status, body = error_body(request.url.path, error)
    return JSONResponse(body, status_code=status, headers=headers)


def _param(loc: tuple[Any, ...]) -> str | None:
    parts = list(loc)
    source = parts.pop(0) if parts and parts[0] in _SOURCES else None
    if source == "header" and parts:
        return "-".join(word.capitalize() for word in str(parts[0]).split("_"))
    return dotted_path(parts) or None


def validation_error(exc: RequestValidationError) -> InvalidRequest:
    first = exc.errors()[0]
    kind = first.get("type", "")
    if kind == "json_invalid":
        return InvalidRequest("The request body is not valid JSON.", code="invalid_json")
    param = _param(tuple(first.get("loc", ())))
    message = client_message(str(first.get("msg", "Invalid value")))
    if kind == "missing":
        message = (
            f"Missing required parameter: {param}." if param else "A request body is required."
        )
        return InvalidRequest(message, param=param, code="parameter_missing")
    if kind == "extra_forbidden":
        return InvalidRequest(f"Unknown parameter: {param}.", param=param, code="parameter_unknown")
    if param is None:
        return InvalidRequest(f"Invalid request body: {message}.", code="parameter_invalid")
    return InvalidRequest(f"Invalid {param}: {message}.", param=param, code="parameter_invalid")


async def _after_authentication(request: Request, error: ApiError) -> JSONResponse:
    """A body that is not JSON is refused only once the request is authenticated: FastAPI
    reads the body before the route's dependencies run, so a stranger would learn of the
    route's 400 before its 401 (services/api/deps.py `authenticate_unread_body`)."""
    try:
        await authenticate_unread_body(request)
    except ApiError as refused:
        return error_response(request, refused)
    return error_response(request, error)


def _allowed_methods(request: Request) -> str | None:
    """Every method some route serves at this path (the router's own Allow names only one)."""
    allowed = []
    for method in _METHODS:
        probe = {
            "type": "http",
            "path": request.scope["path"],
            "root_path": request.scope.get("root_path", ""),
            "method": method,
            "headers": [],
        }
        if any(route.matches(probe)[0] == Match.FULL for route in request.app.router.routes):
            allowed.append(method)
            if method == "GET":  # services/api/head.py
                allowed.append("HEAD")
    return ", ".join(allowed) or None


NOT_JSON = InvalidRequest(
    "The request body is not valid JSON (or is nested too deeply to read).", code="invalid_json"
)
UNEXPECTED = InternalError("An internal error occurred.", code="internal_error")
STORE_UNAVAILABLE = InternalError(
    "The database is unavailable; retry shortly with the same Idempotency-Key.",
    code="service_unavailable",
)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def on_api_error(request: Request, exc: ApiError) -> JSONResponse:
        if exc.status >= 500:
            log.error("request failed: %s (%s)", exc.message, exc.code)
        return error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = validation_error(exc)
        if error.code == "invalid_json":
            return await _after_authentication(request, error)
        return error_response(request, error)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 405:
            err: ApiError = MethodNotAllowed(
                f"{request.method} is not allowed on {request.url.path}.", code="method_not_allowed"
            )
            allow = _allowed_methods(request) or (exc.headers or {}).get("Allow")
            return error_response(request, err, {"Allow": allow} if allow else None)
        if isinstance(exc.__cause__, ApiError):
            # FastAPI wraps errors raised while reading the body (e.g. the size limit).
            return error_response(request, exc.__cause__)
        if exc.status_code == 404:
            err = NotFound(
                f"Unrecognized request URL ({request.method} {request.url.path}).",
                code="route_unknown",
            )
            return error_response(request, err)
        if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError | ValueError):
            # FastAPI's 400 for a body json.loads could not parse beyond a JSONDecodeError:
            # nesting deep enough to exhaust the parser's recursion, or undecodable bytes.
            return await _after_authentication(request, NOT_JSON)
        if exc.status_code == 400:
            # FastAPI's own 400: in the interface's shape.
            return error_response(
                request, InvalidRequest(str(exc.detail), code="parameter_invalid")
            )
        err = InvalidRequest(str(exc.detail), code="invalid_request")
        status, body = error_body(request.url.path, err)
        return JSONResponse(body, status_code=exc.status_code if "error" in body else status)

    @app.exception_handler(ConnectionFailure)
    async def on_store_unavailable(request: Request, exc: ConnectionFailure) -> JSONResponse:
        log.warning("MongoDB unavailable: %s", type(exc).__name__)
        return error_response(request, STORE_UNAVAILABLE)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(request, UNEXPECTED)
