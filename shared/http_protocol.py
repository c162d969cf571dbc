"""uvicorn's HTTP/1.1 protocol with a deadline for the request line and headers, and a
minimum pace for request bodies.

uvicorn's own timers cover only the pause between requests, and any byte received stops them:
a client that connects and sends nothing, or drips its headers a byte at a time, keeps the
connection (and a file descriptor and buffers) for as long as it likes; the red team held 400
such connections open for 45 s. Here every connection must deliver a complete request head
within `header_timeout_seconds` of connecting, and again after each response: otherwise it is
closed. A request's response may take as long as it takes.

Its body must keep coming: after `body_grace_seconds`, at least `min_body_bytes_per_second`
on average since its head (as Kestrel's MinRequestBodyDataRate), or the connection is closed;
one byte a minute on thousands of connections would hold their descriptors and buffers
forever. Time this side does not read (uvicorn paused reading until the app takes what it
has; a client waiting for `100 Continue`) does not count against the client.
"""

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

# How often a body whose reading this side paused is looked at again.
PAUSED_RECHECK_SECONDS = 1.0


class HeaderDeadlineProtocol(H11Protocol):
    header_timeout_seconds = 10.0
    body_grace_seconds = 10.0
    min_body_bytes_per_second = 1024.0

    def connection_made(  # type: ignore[override]  # narrowed to Transport as H11Protocol does
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._served: RequestResponseCycle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_from = 0.0
        self._body_bytes = 0
        self._body_paused = False
        self._await_head()

    def data_received(self, data: bytes) -> None:
        self._body_bytes += len(data)
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
        self._stop_body_timer()
        super().connection_lost(exc)

    def _notice_new_request(self) -> None:
        if self.cycle is not None and self.cycle is not self._served:
            self._served = self.cycle
            self._stop_timer()
            self._clock_body()

    def _clock_body(self) -> None:
        """Start timing the body of the request just begun, if it has one still to come."""
        self._stop_body_timer()
        if self.conn.their_state is not h11.SEND_BODY:
            return
        self._body_from = self.loop.time()
        self._body_bytes = 0
        # A client waiting to be told to continue is paused from the start: told at any time
        # before the first look, it still has the whole grace from that look on.
        cycle = self.cycle
        self._body_paused = cycle is not None and cycle.waiting_for_100_continue
        self._body_timer = self.loop.call_later(self.body_grace_seconds, self._check_body)

    def _check_body(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if (
            cycle is None
            or cycle.response_complete  # answered: the head deadline takes over
            or self.conn.their_state is not h11.SEND_BODY
            or self.transport.is_closing()
        ):
            return
        if self.flow.read_paused or cycle.waiting_for_100_continue:
            # This side is not reading: the client is not late. Looked at again every second
            # (or grace, if shorter) meanwhile.
            self._body_paused = True
            wait = min(PAUSED_RECHECK_SECONDS, self.body_grace_seconds)
            self._body_timer = self.loop.call_later(wait, self._check_body)
            return
        if self._body_paused:
            # Reading resumed since the last look: the client's clock starts now, with the
            # whole grace (restarted at the last paused look, a client told to continue just
            # before this one had almost none of it, and was cut off having sent nothing).
            self._body_paused = False
            self._body_from = self.loop.time()
            self._body_bytes = 0
            self._body_timer = self.loop.call_later(self.body_grace_seconds, self._check_body)
            return
        allowed = self.body_grace_seconds + self._body_bytes / self.min_body_bytes_per_second
        late = self.loop.time() - self._body_from - allowed
        if late < 0:
            self._body_timer = self.loop.call_later(-late, self._check_body)
            return
        self.logger.warning("closed a connection whose request body came too slowly")
        self.transport.close()

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

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


def with_header_deadline(
    seconds: float,
    body_grace_seconds: float = HeaderDeadlineProtocol.body_grace_seconds,
    min_body_bytes_per_second: float = HeaderDeadlineProtocol.min_body_bytes_per_second,
) -> Any:
    """The protocol class for uvicorn's `http=` option, with this deadline and body pace."""
    return type(
        "HeaderDeadline",
        (HeaderDeadlineProtocol,),
        {
            "header_timeout_seconds": seconds,
            "body_grace_seconds": body_grace_seconds,
            "min_body_bytes_per_second": min_body_bytes_per_second,
        },
    )
