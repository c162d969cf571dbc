"""HEAD wherever GET is served (RFC 9110, 9.3.2): the GET runs and its body is not sent.

Routes that answer HEAD themselves (the public pages, which record nothing for it) keep doing
so; a path served by GET alone (the API's reads, images, /healthz) is answered here as that
GET with the same status and headers, Content-Length included. Not in the OpenAPI document:
HEAD of an operation is implied by its GET.
"""

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or not _served_by_get(scope):
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        as_get = {**scope, "method": "GET"}
        try:
            await self.app(as_get, receive, without_body)
        finally:
            # The route the router found, for the metrics' label (shared/metrics.py) outside.
            if "route" in as_get:
                scope["route"] = as_get["route"]


def _served_by_get(scope: Scope) -> bool:
    routes = scope["app"].router.routes

    def matched(method: str) -> bool:
        probe = {**scope, "method": method}
        return any(route.matches(probe)[0] == Match.FULL for route in routes)

    return not matched("HEAD") and matched("GET")
