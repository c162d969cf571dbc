"""The webhook receiver of bench.webhooks, in a process of its own.

Run as `python -m bench.receiver --port P --out DIR` (bench.webhooks starts it): uvicorn
serving a bare ASGI app on 127.0.0.1 that answers 200 at once (500 after SLOW_SECONDS on a
path ending in SLOW_SUFFIX, the failing endpoint of the isolation levels). Each delivery's
arrival is appended to DIR/arrivals.ndjson as `[webhook-id, path, event created_at (unix s),
received (unix s)]`, and the first delivery of a level (body and signature headers) is written
to DIR/sample.json, for the raw-POST reference. POSTs under /raw/ are answered, not recorded.

A process of its own because a receiver inside the bench process (a thread per connection)
shared its GIL with the bench's issuing client: under load a request waited there for tens to
hundreds of milliseconds before it was even timestamped, which the latency then counted
(docs/performance.md, the webhooks runs of 2026-11-25 afternoon). A customer's receiver is
not inside the customer's load generator either.
"""

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import uvicorn

SLOW_SUFFIX = "/slow"
SLOW_SECONDS = 2.0
RAW_PREFIX = "/raw/"
LEVEL_PREFIX = "/level-"
HOP_HEADERS = {"host", "content-length", "connection"}
ARRIVALS = "arrivals.ndjson"
SAMPLE = "sample.json"

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Receiver:
    """The ASGI app: answers, then records the arrival."""

    def __init__(self, out: Path):
        self._arrivals = (out / ARRIVALS).open("a", buffering=1)
        self._sample = out / SAMPLE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        received = time.time()
        body = await _body(receive)
        path: str = scope["path"]
        slow = path.endswith(SLOW_SUFFIX)
        if slow:
            await asyncio.sleep(SLOW_SECONDS)
        status = 500 if slow else 200
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        if path.startswith(RAW_PREFIX):
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if path.startswith(LEVEL_PREFIX) and not self._sample.exists():
            signed = {key: value for key, value in headers.items() if key not in HOP_HEADERS}
            self._sample.write_text(json.dumps({"body": body.decode(), "headers": signed}))
        created = datetime.fromisoformat(json.loads(body)["created_at"].replace("Z", "+00:00"))
        arrival = [headers.get("webhook-id", ""), path, created.timestamp(), received]
        self._arrivals.write(json.dumps(arrival) + "\n")


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.receiver", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="where arrivals are written")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    uvicorn.run(
        Receiver(args.out),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        # The raw-POST reference opens its 16 connections at once.
        backlog=256,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
