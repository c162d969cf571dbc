"""Reading a nats-server's monitoring endpoint: the streams `/jsz?streams=true` reports."""

from typing import Any


def stream_details(jsz: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The streams of a `/jsz?streams=true` answer, by name (config, state, cluster)."""
    return {
        stream["name"]: stream
        for account in jsz.get("account_details") or []
        for stream in account.get("stream_detail") or []
    }
