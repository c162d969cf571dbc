"""uvicorn's HTTP/1.1 protocol with a deadline for the request line and headers.

uvicorn's own timers cover only the pause between requests, and any byte received stops them:
a client that connects and sends nothing, or drips its headers a byte at a time, keeps the
connection (and a file descriptor and buffers) for as long as it likes; the red team held 400
such connections open for 45 s. Here every connection must deliver a complete request head
within `header_timeout_seconds` of connecting, and again after each response: otherwise it is
closed. A request whose head arrived is never cut, however long its body or response take.
"""

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle


class HeaderDeadlineProtocol(H11Protocol):
    header_timeout_seconds = 10.0

    def connection_made(  # type: ignore[override]  # narrowed to Transport as H11Protocol does
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._served: RequestResponseCycle | None = None
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._notice_new_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        self._await_head()
        self._notice_new_request()  # a pipelined request may have started already

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def _notice_new_request(self) -> None:
        if self.cycle is not None and self.cycle is not self._served:
            self._served = self.cycle
            self._stop_timer()

    def _await_head(self) -> None:
        self._stop_timer()
        self._head_timer = self.loop.call_later(self.header_timeout_seconds, self._head_too_slow)

    def _stop_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        in_progress = self.cycle is not None and not self.cycle.response_complete
        if not in_progress and not self.transport.is_closing():
            self.transport.close()


def with_header_deadline(seconds: float) -> Any:
    """The protocol class for uvicorn's `http=` option, with this deadline."""
    return type("HeaderDeadline", (HeaderDeadlineProtocol,), {"header_timeout_seconds": seconds})
