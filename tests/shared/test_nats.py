"""reply_to_command: every failure becomes a CommandFailed reply with the right code; nothing
larger than NATS carries is sent, either way."""

import json

import pytest
from pydantic import BaseModel
from pymongo.errors import AutoReconnect, ServerSelectionTimeoutError

from shared.errors import PayloadTooLarge
from shared.messages import DeleteWebhook
from shared.nats import create_broker, max_payload, reply_to_command, request_command


class _Big(BaseModel):
    blob: str


async def _reply(exc: Exception) -> dict[str, object]:
    async def handle(body: bytes) -> BaseModel:
        raise exc

    error: dict[str, object] = json.loads(await reply_to_command(b"{}", handle))["error"]
    return error


async def test_mongodb_unreachable_is_a_retryable_service_unavailable() -> None:
    for exc in (AutoReconnect("connection closed"), ServerSelectionTimeoutError("no server")):
        error = await _reply(exc)
        assert (error["status"], error["code"]) == (500, "service_unavailable")
        assert "connection closed" not in str(error["message"])


async def test_anything_else_unexpected_says_nothing_about_internals() -> None:
    error = await _reply(RuntimeError("secret detail"))
    assert (error["status"], error["code"]) == (500, "internal_error")
    assert error["message"] == "An internal error occurred."


async def test_a_reply_too_large_to_send_is_logged_and_answered_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """FastStream drops a reply over max_payload without a word: the requester saw a timeout."""

    async def handle(body: bytes) -> BaseModel:
        return _Big(blob="x" * 2000)

    fits = json.loads(await reply_to_command(b"{}", handle, max_payload_bytes=10_000))
    assert fits["ok"] is True
    refused = json.loads(await reply_to_command(b"{}", handle, max_payload_bytes=1000))
    assert (refused["error"]["status"], refused["error"]["code"]) == (500, "reply_too_large")
    assert "over NATS's max_payload" in caplog.text


async def test_a_command_too_large_for_nats_is_a_413_before_it_is_sent(nats_url: str) -> None:
    broker = create_broker(nats_url)
    await broker.connect()
    try:
        limit = max_payload(broker)
        assert limit is not None
        command = DeleteWebhook(command_id="c", account_id="a", mode="test", webhook_id="x" * limit)
        with pytest.raises(PayloadTooLarge) as raised:
            await request_command(broker, command, 1.0)
        assert raised.value.code == "body_too_large"
    finally:
        await broker.stop()
