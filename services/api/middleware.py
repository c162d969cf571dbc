"""ASGI middleware: a Request-Id on every response and in every log line, and body limits.

Bodies over `max_body_bytes` are refused with 413 (checked against Content-Length, and while
streaming when the length is not declared); a body sent with a non-JSON content type is 415.
Both answer in the spec's envelope. A path with a `BodyRule` (the import routes of
/v1/jobs) has a limit and content types of its own.

It also gives each request a `RequestLimits` (services/api/limits.py): the RateLimit headers
the limits computed are added to the response, and a request refused with a 4xx gives back the
quota it reserved (after a 5xx the pass may exist, so the unit stays counted).
"""

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pymongo.errors import ConnectionFailure
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.errors import STORE_UNAVAILABLE
from services.api.limits import RequestLimits, request_limits_var
from services.api.rendering import error_body
from shared.errors import ApiError, InternalError, PayloadTooLarge, UnsupportedMediaType
from shared.ids import new_id
from shared.logs import account_id_var, request_id_var

log = logging.getLogger("tessera.access")
_TOKEN = re.compile(r"pdl_[A-Za-z0-9_\-]+")
# The public pages' ids are their bearer secrets: a pass's short id opens its page (holder's
# name, fields, barcode), a bundle's id its page, a link's token its pass.
_PUBLIC_ID = re.compile(r"^/([pbl])/[^/.]+")
_BODY_METHODS = {b"POST", b"PUT", b"PATCH", "POST", "PUT", "PATCH"}


@dataclass(frozen=True)
class BodyRule:
    """One path's own body limit and, when not JSON, the content types it takes."""

    max_bytes: int
    media_types: frozenset[bytes] = frozenset()


# Whether a request may send a body larger than the default limit: raises the error its
# route's authentication would (401, or 403 for a scanner key).
Uploader = Callable[[Scope], Awaitable[None]]


class RequestContextMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        body_rules: Mapping[str, BodyRule] | None = None,
        uploader: Uploader | None = None,
    ):
        """A path whose `BodyRule` raises the limit is authenticated (`uploader`) before its
        body is read: FastAPI parses a whole body before a route's dependencies run, so a
        stranger could otherwise have 64 MiB of JSON parsed only to be answered 401."""
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_rules = dict(body_rules or {})
        self.uploader = uploader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_id("request")
        request_id_var.set(request_id)
        account_id_var.set(None)
        limits = RequestLimits()
        request_limits_var.set(limits)
        started = time.perf_counter()
        status_holder: dict[str, int] = {}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                if 400 <= message["status"] < 500:
                    # Refused: nothing was made. Give the reserved units back before the
                    # client hears the answer, so that what it reads next is settled.
                    await _undo(limits)
                headers = _relative_location(list(message.get("headers", [])), scope)
                headers.append((b"request-id", request_id.encode()))
                headers.extend(
                    (name.lower().encode(), value.encode())
                    for name, value in limits.headers.items()
                )
                message = {**message, "headers": headers}
            await send(message)

        try:
            # The documented order: 415/413 from the headers, then the key (the import routes),
            # then the body.
            error = self._refuse(scope) or await self._unauthorized_upload(scope)
            if error is not None:
                await _send_error(send_with_id, scope["path"], error)
                return
            await self.app(scope, self._limited(receive, self._max_bytes(scope)), send_with_id)
        except PayloadTooLarge as exc:
            if "status" not in status_holder:
                await _send_error(send_with_id, scope["path"], exc)
        except Exception:
            # Answer here rather than let Starlette's outer handler re-raise into uvicorn,
            # which would close the client's keep-alive connection after the 500.
            log.exception("unhandled error")
            if "status" not in status_holder:
                await _send_error(
                    send_with_id,
                    scope["path"],
                    InternalError("An internal error occurred.", code="internal_error"),
                )
        finally:
            # After a 5xx the pass may exist (a timeout after the commit), so its quota unit
            # stays counted; a 4xx gave its units back as it was sent.
            log.info(
                "%s %s -> %s in %.1f ms",
                scope["method"],
                loggable_path(scope["path"]),
                status_holder.get("status", 0),
                (time.perf_counter() - started) * 1000,
            )

    def _max_bytes(self, scope: Scope) -> int:
        rule = self.body_rules.get(scope["path"])
        return self.max_body_bytes if rule is None else rule.max_bytes

    async def _unauthorized_upload(self, scope: Scope) -> ApiError | None:
        # POST only: another method on these paths answers 405 from the router, as documented.
        if self.uploader is None or scope["method"] != "POST":
            return None
        if self._max_bytes(scope) <= self.max_body_bytes:
            return None
        try:
            await self.uploader(scope)
        except ApiError as exc:
            return exc
        except ConnectionFailure as exc:  # answered as the app answers it (errors.py)
            log.warning("MongoDB unavailable: %s", type(exc).__name__)
            return STORE_UNAVAILABLE
        return None

    def _refuse(self, scope: Scope) -> ApiError | None:
        if scope["method"] not in _BODY_METHODS:
            return None
        headers = {key.lower(): value for key, value in scope["headers"]}
        length = headers.get(b"content-length")
        limit = self._max_bytes(scope)
        if length is not None and length.isdigit() and int(length) > limit:
            return _too_large(limit)
        has_body = (length is not None and length != b"0") or b"transfer-encoding" in headers
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        sent_types = sum(1 for key, _ in scope["headers"] if key.lower() == b"content-type")
        if has_body and sent_types > 1:
            # FastAPI reads the first and this the last: one request, two readings.
            return UnsupportedMediaType(
                "Send one Content-Type header.", code="unsupported_media_type"
            )
        rule = self.body_rules.get(scope["path"])
        if rule is not None and rule.media_types:
            if has_body and content_type not in rule.media_types:
                wanted = " or ".join(sorted(media.decode() for media in rule.media_types))
                return UnsupportedMediaType(
                    f"Send the request body with Content-Type: {wanted}.",
                    code="unsupported_media_type",
                )
            return None
        # What FastAPI parses as JSON: application/json or application/<anything>+json (a
        # text/x+json passed here and reached the route as bytes: 400 "not a JSON object").
        is_json = content_type == b"application/json" or (
            content_type.startswith(b"application/") and content_type.endswith(b"+json")
        )
        if has_body and not is_json:
            return UnsupportedMediaType(
                "Send the request body as JSON with Content-Type: application/json.",
                code="unsupported_media_type",
            )
        return None

    def _limited(self, receive: Receive, limit: int) -> Receive:
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        return limited


def _relative_location(
    headers: list[tuple[bytes, bytes]], scope: Scope
) -> list[tuple[bytes, bytes]]:
    """Redirects to this host answer a relative Location. Starlette builds the trailing-slash
    redirect from the Host header, which the client chooses: absolute, it would send the
    client (or a cache in between) to any host named in that header."""
    host = dict(scope["headers"]).get(b"host")
    result = []
    for name, value in headers:
        if name.lower() == b"location" and host is not None:
            parts = urlsplit(value.decode("latin-1"))
            if parts.netloc and parts.netloc.encode("latin-1").lower() == host.lower():
                # One leading slash: "//other.host/x" would be a protocol-relative URL.
                relative = "/" + parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")
                value = relative.encode("latin-1")
        result.append((name, value))
    return result


async def _undo(limits: RequestLimits) -> None:
    steps, limits.on_failure = limits.on_failure, []
    for step in steps:
        try:
            await step()
        except Exception:
            log.exception("could not give back a reserved quota unit")


def loggable_path(path: str) -> str:
    """The path with download-link tokens and the public pages' ids masked: one in a log is a
    leaked page or link."""
    return _TOKEN.sub("pdl_[redacted]", _PUBLIC_ID.sub(r"/\1/[redacted]", path))


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"The request body is larger than the limit of {limit} bytes.", code="body_too_large"
    )


async def _send_error(send: Any, path: str, error: ApiError) -> None:
    status, payload = error_body(path, error)
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
