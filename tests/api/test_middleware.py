"""The request middleware's undo of reserved units: a refused request (4xx) gives them back
before its answer leaves, a failed one (5xx, the pass may exist) keeps them."""

import asyncio

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.limits import request_limits_var
from services.api.middleware import RequestContextMiddleware


def _app(status: int, journal: list[str]) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        limits = request_limits_var.get()
        assert limits is not None

        async def give_back() -> None:
            journal.append("given back")

        limits.on_failure.append(give_back)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def _call(status: int) -> list[str]:
    journal: list[str] = []
    middleware = RequestContextMiddleware(_app(status, journal), max_body_bytes=1024)
    scope: Scope = {"type": "http", "method": "GET", "path": "/v1/passes", "headers": []}

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        journal.append(message["type"])

    asyncio.run(middleware(scope, receive, send))
    return journal


@pytest.mark.parametrize("status", [400, 402, 404, 409])
def test_a_refused_request_gives_its_units_back_before_the_answer(status: int) -> None:
    assert _call(status) == ["given back", "http.response.start", "http.response.body"]


@pytest.mark.parametrize("status", [200, 500, 503])
def test_a_request_that_made_or_may_have_made_a_pass_keeps_its_units(status: int) -> None:
    assert _call(status) == ["http.response.start", "http.response.body"]
