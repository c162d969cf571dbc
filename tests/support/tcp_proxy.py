"""A TCP proxy on a real socket between a client and a server, which can drop a connection on
cue: for tests of what a service does when its connection to the store fails mid-operation
(the driver sees a real closed socket, as when the store restarts or the network breaks).

`cut_next(marker)` arms it: the next client message that contains `marker` (for example
b"startTransaction", the first statement of a MongoDB transaction) is not forwarded, and its
connection is closed on both sides. While `refusing` is set, a new connection is closed as
soon as it is accepted (the server is unreachable: a client keeps trying to reconnect). While
`silent` is set, nothing is forwarded either way and nothing is closed (the server's host gone
down, or a network partition: the client's socket stays open and hears nothing).
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class CuttingProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self._upstream = (upstream_host, upstream_port)
        self._marker: bytes | None = None
        self.cuts = 0
        self.refusing = False
        self.silent = False
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def cut_next(self, marker: bytes) -> None:
        self._marker = marker

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        if self.silent:  # accepted, and never answered
            with contextlib.suppress(OSError):
                while await reader.read(65536):
                    pass
            return
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        upstream = self._spawn(self._pipe(up_reader, writer, cutting=False, both=(up_writer,)))
        downstream = self._spawn(self._pipe(reader, up_writer, cutting=True, both=(writer,)))
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        for writer_ in (writer, up_writer):
            writer_.close()

    def _spawn(self, work: "asyncio.Future[None] | object") -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        cutting: bool,
        both: tuple[asyncio.StreamWriter, ...],
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await source.read(65536):
                if self.silent:
                    continue
                if cutting and self._marker is not None and self._marker in chunk:
                    self._marker = None
                    self.cuts += 1
                    for writer in (sink, *both):
                        writer.close()
                    return
                sink.write(chunk)
                await sink.drain()


@asynccontextmanager
async def cutting_proxy(upstream_host: str, upstream_port: int) -> AsyncIterator[CuttingProxy]:
    proxy = CuttingProxy(upstream_host, upstream_port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
