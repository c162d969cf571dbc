"""NATS helpers: the broker factory, the streams, and request/reply with error replies.

FastStream sends no reply when a handler raises, so every command handler goes through
`reply_to_command`, which always answers: the result, or the error as a `CommandFailed`.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsMessage, PullSub
from nats.errors import NoRespondersError, OutboundBufferLimitError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError, ServiceUnavailableError
from pydantic import BaseModel, ValidationError
from pymongo.errors import ConnectionFailure

from shared.errors import ApiError, InternalError, PayloadTooLarge, error_from_wire
from shared.messages import (
    EVENTS_STREAM,
    EVENTS_SUBJECT_PREFIX,
    LIVE_UPDATES_STREAM,
    LIVE_UPDATES_SUBJECT_PREFIX,
    Command,
    CommandFailed,
    CommandOk,
    PassEventMessage,
    R,
    WireError,
    ok_reply,
    pass_event_adapter,
    reply_adapter,
)
from shared.mongo import origin

log = logging.getLogger(__name__)

# JetStream drops a re-published event with the same Nats-Msg-Id inside this window; the
# consumers also dedupe by event id, so a replay after the window is still harmless.
DUPLICATE_WINDOW = timedelta(minutes=10)
# The stream is a buffer between services, not the record (MongoDB is): a consumer that is down
# for up to this long still receives everything when it comes back.
EVENTS_RETENTION = timedelta(days=30)
# Room left below max_payload for the headers and reply subject NATS adds to a request.
COMMAND_HEADROOM_BYTES = 4096


# The client pings its server this often, and takes the connection for dead once this many
# pings went unanswered, then reconnects (to another node of a cluster): a server that went
# silent (its host down, a network partition; a killed process closes its socket, which is
# noticed at once) is left within about 15 s, where nats-py's defaults (120 s, 2) took 4 to 6
# minutes, every command and publish meanwhile timing out and /readyz still answering 200.
PING_SECONDS = 5
MAX_OUTSTANDING_PINGS = 2


def create_broker(url: str, ping_seconds: int = PING_SECONDS) -> NatsBroker:
    """`url` may list the nodes of a cluster, comma-separated (docs/scaling.md)."""
    servers = [part.strip() for part in url.split(",") if part.strip()]
    return NatsBroker(
        servers,
        logger=None,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        ping_interval=ping_seconds,
        max_outstanding_pings=MAX_OUTSTANDING_PINGS,
    )


def events_stream_config(replicas: int = 1) -> StreamConfig:
    """`replicas`: the copies a NATS cluster keeps (TESSERA_EVENTS_STREAM_REPLICAS)."""
    return StreamConfig(
        name=EVENTS_STREAM,
        num_replicas=replicas,
        subjects=[f"{EVENTS_SUBJECT_PREFIX}.>"],
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW.total_seconds(),
        max_age=EVENTS_RETENTION.total_seconds(),
    )


def live_updates_stream_config(replicas: int = 1) -> StreamConfig:
    """A work queue: each live update is removed once the events service acknowledged it, and
    waits (as long as events do) while no events service runs."""
    return StreamConfig(
        name=LIVE_UPDATES_STREAM,
        num_replicas=replicas,
        subjects=[f"{LIVE_UPDATES_SUBJECT_PREFIX}.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW.total_seconds(),
        max_age=EVENTS_RETENTION.total_seconds(),
    )


def events_stream() -> JStream:
    """The stream as subscribers name it; `ensure_events_stream` declares it, not FastStream."""
    return JStream(EVENTS_STREAM, declare=False)


def subscribe_to_events(
    broker: NatsBroker, durable: str, handle: Callable[[PassEventMessage], Awaitable[None]]
) -> None:
    """Consume every lifecycle event as the durable pull consumer `durable` (replicas share it).

    NACK_ON_ERROR: when `handle` fails (MongoDB down) the event is redelivered, never lost. A
    message that can never parse would be redelivered forever: it is rejected, loudly."""

    @broker.subscriber(
        f"{EVENTS_SUBJECT_PREFIX}.>",
        stream=events_stream(),
        durable=durable,
        pull_sub=PullSub(batch_size=50, timeout=1.0),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )
    async def on_event(msg: NatsMessage) -> None:
        try:
            event = pass_event_adapter.validate_json(msg.body)
        except ValidationError:
            log.error("dropping malformed event %s on %s", msg.message_id, msg.raw_message.subject)
            await msg.reject()
            return
        await handle(event)


async def request_command(broker: NatsBroker, command: Command[R], timeout_seconds: float) -> R:
    """Send a command to its owner and return its typed result, or raise the ApiError the
    owner replied with."""
    payload = command.model_dump_json().encode()
    limit = max_payload(broker)
    if limit is not None and len(payload) > limit - COMMAND_HEADROOM_BYTES:
        # NATS would refuse it; the body limit normally stops such a request before this.
        raise PayloadTooLarge(
            f"The request is too large to process ({len(payload)} bytes as a command); "
            f"send less than {limit - COMMAND_HEADROOM_BYTES} bytes.",
            code="body_too_large",
        )
    try:
        reply = await broker.request(payload, command.subject, timeout=timeout_seconds)
    except (NoRespondersError, OutboundBufferLimitError) as exc:
        # OutboundBufferLimitError: NATS is reconnecting and holds as much as it may.
        raise InternalError(
            "The service that handles this request is unavailable; retry shortly.",
            code="service_unavailable",
        ) from exc
    except (NatsTimeout, TimeoutError) as exc:
        raise InternalError(
            "The request did not complete in time; retry it with the same Idempotency-Key.",
            code="timeout",
        ) from exc
    parsed = reply_adapter(command.result_type).validate_json(reply.body)
    if isinstance(parsed, CommandOk):
        return command.parse_result(parsed.result)
    err = parsed.error
    raise error_from_wire(err.type, err.status, err.message, err.param, err.code)


def max_payload(broker: NatsBroker) -> int | None:
    """The largest message the connected server takes (its INFO max_payload)."""
    try:
        return int(broker.connection.max_payload)
    except Exception:  # not connected yet: the publish itself will say so
        return None


async def reply_to_command(
    body: bytes,
    handle: Callable[[bytes], Awaitable[BaseModel]],
    max_payload_bytes: int | None = None,
) -> bytes:
    """Run a command handler and always produce a reply, never an exception.

    A result larger than `max_payload_bytes` could not be sent (FastStream drops such a reply
    without a word, and the requester sees a timeout): it is logged and answered as an error."""
    error: ApiError
    try:
        with origin("command"):  # the store round trips a command costs (shared/mongo.py)
            reply = ok_reply(await handle(body))
        if max_payload_bytes is None or len(reply) <= max_payload_bytes:
            return reply
        log.error("a reply of %d bytes is over NATS's max_payload; answering an error", len(reply))
        error = InternalError(
            "The result is too large to send; it was stored. Contact the operator.",
            code="reply_too_large",
        )
    except ApiError as exc:
        error = exc
    except ValidationError as exc:
        log.error("malformed command: %s", exc.errors(include_input=False))
        error = InternalError("Malformed internal command.", code="internal_error")
    except ConnectionFailure as exc:
        # MongoDB unreachable (restarting, or the connection dropped mid-command): whatever
        # committed is in processed_commands, so a retry with the same key is safe.
        log.warning("command failed, MongoDB unavailable: %s", exc)
        error = InternalError(
            "The database is unavailable; retry shortly with the same Idempotency-Key.",
            code="service_unavailable",
        )
    except Exception:
        log.exception("command failed")
        error = InternalError("An internal error occurred.", code="internal_error")
    wire = WireError(
        type=error.type,
        status=error.status,
        message=error.message,
        param=error.param,
        code=error.code,
    )
    return CommandFailed(error=wire).model_dump_json().encode()


async def ensure_events_stream(broker: NatsBroker, replicas: int = 1) -> None:
    """Create the events stream, or bring an existing one to the current config.

    Every replica of every service runs this at start, at once: creating a stream that exists
    with the same config succeeds, so the race is harmless."""
    await _ensure_stream(broker, events_stream_config(replicas))


async def ensure_streams(broker: NatsBroker, replicas: int = 1) -> None:
    """Declare every stream (events and live updates), as `ensure_events_stream` does one."""
    await ensure_events_stream(broker, replicas)
    await _ensure_stream(broker, live_updates_stream_config(replicas))


# At start, a cluster may have no JetStream leader yet (its nodes starting too): the streams
# are declared again this often, for at most this long, before the start fails.
STREAM_RETRY_SECONDS = 1.0
STREAM_WAIT_SECONDS = 60.0


class StreamNotPlaced(Exception):
    """JetStream refused to create a stream it does not have: not peers enough yet."""


async def _ensure_stream(broker: NatsBroker, config: StreamConfig) -> None:
    js = broker.connection.jetstream()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STREAM_WAIT_SECONDS
    while True:
        try:
            try:
                await js.add_stream(config=config)
            except BadRequestError as refused:
                try:
                    await js.update_stream(config=config)
                except NotFoundError:
                    # Refused for another reason than being there already: a cluster with a
                    # leader but not yet peers enough for its replicas ("no suitable peers
                    # for placement", nodes still starting). Asked again, like no leader.
                    raise StreamNotPlaced(refused.description or "refused") from refused
            return
        except (ServiceUnavailableError, NatsTimeout, TimeoutError, StreamNotPlaced) as exc:
            if loop.time() > deadline:
                raise
            log.warning(
                "JetStream could not declare stream %s yet (%s); trying again",
                config.name,
                type(exc).__name__,
            )
            await asyncio.sleep(STREAM_RETRY_SECONDS)
