"""/readyz answers within its checks' deadline: a store that does not answer is a 503 naming
it, not a request that hangs for the driver's 30 s of server selection."""

import socket

from fastapi import FastAPI
from fastapi.testclient import TestClient

from shared.health import health_router
from shared.mongo import create_client


def _silent_port() -> socket.socket:
    """A listening socket that never accepts: a connection to it is never answered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    return listener


async def test_a_store_that_does_not_answer_is_a_503_within_the_deadline() -> None:
    with _silent_port() as silent:
        port = silent.getsockname()[1]
        client = create_client(f"mongodb://127.0.0.1:{port}/?directConnection=true")

        async def ping_mongo() -> None:
            await client.admin.command("ping")

        async def fine() -> None:
            return None

        app = FastAPI()
        app.include_router(health_router({"mongodb": ping_mongo, "nats": fine}, check_seconds=0.5))
        try:
            with TestClient(app) as http:
                response = http.get("/readyz")
        finally:
            await client.close()
    assert response.status_code == 503
    assert response.json() == {
        "ready": False,
        "checks": {"mongodb": "failed: no answer in 0.5 s", "nats": "ok"},
    }
