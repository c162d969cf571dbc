"""Every connection must send a complete request head in time, or it is closed; a request's
body must keep coming at a minimum pace once its grace is over; a response may take as long
as it takes."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from shared.http_protocol import with_header_deadline
from shared.runner import bind

DEADLINE = 0.5
BODY_GRACE = 0.5
MIN_BODY_RATE = 200.0  # bytes a second
# Far beyond the deadline: a connection still open this long was not closed by it.
PATIENCE = 10.0


async def _slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] in ("/slow", "/late-read"):
        await asyncio.sleep(DEADLINE * 3)  # the app's own work, not a wait for the test
    if scope["path"] == "/read-before-the-first-look":
        await asyncio.sleep(BODY_GRACE * 0.8)
    if scope["path"] == "/read-between-looks":
        # Just after one of the protocol's looks at a paused body (one a grace apart).
        await asyncio.sleep(BODY_GRACE * 2.25)
    if scope["method"] == "POST":
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
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
        http=with_header_deadline(DEADLINE, BODY_GRACE, MIN_BODY_RATE),
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


def _post_head(path: str, length: int, *extra: bytes) -> bytes:
    lines = [f"POST {path} HTTP/1.1".encode(), b"Host: x", b"Connection: close"]
    lines += [f"Content-Length: {length}".encode(), *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _drip(
    writer: asyncio.StreamWriter, closed: "asyncio.Task[bytes]", chunks: list[bytes], every: float
) -> None:
    for chunk in chunks:
        if closed.done():
            return
        writer.write(chunk)
        await asyncio.sleep(every)  # the client's pace, the thing under test


async def test_a_body_dripped_slower_than_the_minimum_pace_is_cut_off(port: int) -> None:
    """10 bytes a second against a minimum of 200: closed once the grace is over, unanswered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post_head("/", 100_000))
    closed = asyncio.create_task(_closed_by_server(reader))
    await _drip(writer, closed, [b"x"] * 1000, 0.1)
    assert closed.done()
    assert await closed == b""
    writer.close()


async def test_a_body_that_keeps_its_pace_past_the_grace_is_answered(port: int) -> None:
    """1,000 bytes a second for twice the grace: every byte read, then the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post_head("/", 1000))
    closed = asyncio.create_task(_closed_by_server(reader))
    await _drip(writer, closed, [b"x" * 50] * 20, 0.05)
    received = await closed
    assert received.startswith(b"HTTP/1.1 200"), received
    writer.close()


async def test_a_client_waiting_for_100_continue_is_not_late(port: int) -> None:
    """The app reads the body only after three times the grace; the client sends it when told
    to continue. Waiting on this side does not count against the client."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post_head("/late-read", 10, b"Expect: 100-continue"))
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE)
    assert interim.startswith(b"HTTP/1.1 100"), interim
    writer.write(b"x" * 10)
    received = await _closed_by_server(reader)
    assert received.startswith(b"HTTP/1.1 200"), received
    writer.close()


async def test_a_client_told_to_continue_has_the_whole_grace_to_start(port: int) -> None:
    """The body's clock restarted at each look while this side waited to read, so a client
    told to continue just after a look had only the rest of that grace: one taking most of
    the grace to start its body (as it may) was cut off, having sent nothing late."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post_head("/read-between-looks", 10, b"Expect: 100-continue"))
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE)
    assert interim.startswith(b"HTTP/1.1 100"), interim
    await asyncio.sleep(BODY_GRACE * 0.8)  # the client's own pace, the thing under test
    writer.write(b"x" * 10)
    received = await _closed_by_server(reader)
    assert received.startswith(b"HTTP/1.1 200"), received
    writer.close()


async def test_a_client_told_to_continue_before_the_first_look_has_the_whole_grace(
    port: int,
) -> None:
    """Told to continue before any look had seen it waiting, the client was timed from its
    head: at the first look, the grace was over, and it was cut off before it could send."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post_head("/read-before-the-first-look", 10, b"Expect: 100-continue"))
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE)
    assert interim.startswith(b"HTTP/1.1 100"), interim
    await asyncio.sleep(BODY_GRACE * 0.5)  # the client's own pace, within its grace
    writer.write(b"x" * 10)
    received = await _closed_by_server(reader)
    assert received.startswith(b"HTTP/1.1 200"), received
    writer.close()
