"""reply_to_command: every failure becomes a CommandFailed reply with the right code."""

import json

from pymongo.errors import AutoReconnect, ServerSelectionTimeoutError

from shared.nats import reply_to_command


async def _reply(exc: Exception) -> dict[str, object]:
    async def handle(body: bytes) -> dict[str, object]:
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
    assert (error["status"], error["code"]) == (500, None)
    assert error["message"] == "An internal error occurred."
