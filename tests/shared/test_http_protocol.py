"""Every connection must send a complete request head in time, or it is closed; a request
whose head arrived is never cut."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from shared.http_protocol import with_header_deadline
from shared.runner import bind

DEADLINE = 0.5
# Far beyond the deadline: a connection still open this long was not closed by it.
PATIENCE = 10.0


async def _slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(DEADLINE * 3)  # the app's own work, not a wait for the test
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def port() -> AsyncIterator[int]:
    sock = bind("127.0.0.1", 0)  # the port the system picks, read back below
    config = uvicorn.Config(
        _slow_app,
        log_config=None,
        access_log=False,
        lifespan="off",
        # uvicorn's own keep-alive timer out of the way: only the head deadline closes.
        timeout_keep_alive=int(PATIENCE * 10),
        http=with_header_deadline(DEADLINE),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(PATIENCE):
        while not server.started:  # noqa: ASYNC110  # uvicorn's Server offers only this flag
            await asyncio.sleep(0.01)
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent until it closed the connection."""
    return await asyncio.wait_for(reader.read(), PATIENCE)


async def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await _closed_by_server(reader) == b""
    writer.close()


async def test_headers_dripped_a_byte_at_a_time_are_cut_off(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    closed = asyncio.create_task(_closed_by_server(reader))
    for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000:
        if closed.done():
            break
        writer.write(bytes([byte]))
        await asyncio.sleep(0.05)
    assert closed.done()
    assert await closed == b""
    writer.close()


async def test_an_idle_keep_alive_connection_is_closed_after_its_response(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    received = await _closed_by_server(reader)
    assert received.startswith(b"HTTP/1.1 200")
    assert received.endswith(b"ok")
    writer.close()


async def test_a_request_that_takes_longer_than_the_deadline_is_answered(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    received = await _closed_by_server(reader)
    assert received.startswith(b"HTTP/1.1 200")
    assert received.endswith(b"ok")
    writer.close()
