"""Request metrics by route template, GET /metrics, and the consumer pending gauge."""

import uuid
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from faststream.nats import NatsBroker
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp, Receive, Scope, Send

from shared.messages import EVENTS_STREAM, EVENTS_SUBJECT_PREFIX
from shared.metrics import CONSUMER_PENDING, consumer_pending, instrument, outbox_pending
from shared.nats import create_broker
from shared.settings import ServiceSettings

Labels = tuple[str, str, str]


def _scrape(client: TestClient) -> dict[str, list[Any]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {family.name: family.samples for family in text_string_to_metric_families(response.text)}


def _requests(families: dict[str, list[Any]], service: str) -> dict[Labels, float]:
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for s in families["tessera_http_requests"]
        if s.name == "tessera_http_requests_total" and s.labels["service"] == service
    }


class RefuseLargeBodies:
    """Answers 413 before routing, as the api's body limit does."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "PUT":
            await send({"type": "http.response.start", "status": 413, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def _app(service: str, token: str | None = None) -> FastAPI:
    router = APIRouter(prefix="/v1")

    @router.get("/passes/{pass_id}")
    async def get_pass(pass_id: str) -> dict[str, str]:
        return {"id": pass_id}

    @router.put("/passes/{pass_id}")
    async def put_pass(pass_id: str) -> dict[str, str]:
        return {"id": pass_id}

    @router.get("/boom")
    async def boom() -> dict[str, str]:
        raise RuntimeError("unhandled")

    app = FastAPI()
    app.include_router(router)
    app.add_middleware(RefuseLargeBodies)
    instrument(app, service, ServiceSettings(metrics_token=token))
    return app


def test_requests_are_counted_by_route_template_never_by_path() -> None:
    service = f"test-{uuid.uuid4().hex[:8]}"
    with TestClient(_app(service), raise_server_exceptions=False) as client:
        assert client.get("/v1/passes/pass_secret123").status_code == 200
        assert client.get("/v1/passes/pass_other456").status_code == 200
        assert client.post("/v1/passes/pass_secret123").status_code == 405
        assert client.put("/v1/passes/pass_secret123").status_code == 413
        assert client.get("/l/pdl_token789").status_code == 404
        assert client.get("/v1/boom").status_code == 500
        families = _scrape(client)

    assert _requests(families, service) == {
        ("GET", "/v1/passes/{pass_id}", "200"): 2,
        ("POST", "/v1/passes/{pass_id}", "405"): 1,
        ("PUT", "unmatched", "413"): 1,  # refused before routing
        ("GET", "unmatched", "404"): 1,
        ("GET", "/v1/boom", "500"): 1,
    }
    durations = [
        s
        for s in families["tessera_http_request_duration_seconds"]
        if s.labels.get("service") == service and s.name.endswith("_count")
    ]
    assert sum(s.value for s in durations) == 6
    labels = [str(s.labels) for samples in families.values() for s in samples]
    for raw in ("pass_secret123", "pass_other456", "pdl_token789"):
        assert not any(raw in text for text in labels)


def test_metrics_is_not_in_the_openapi_schema() -> None:
    with TestClient(_app(f"test-{uuid.uuid4().hex[:8]}")) as client:
        assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def _pending(consumer: str) -> float | None:
    for family in CONSUMER_PENDING.collect():
        for sample in family.samples:
            if sample.labels["consumer"] == consumer:
                return sample.value
    return None


async def _durable_with_pending(broker: NatsBroker, consumer: str) -> None:
    """A durable consumer of the events stream with 3 events waiting and 2 handed out but not
    acknowledged."""
    subject = f"{EVENTS_SUBJECT_PREFIX}.test.{consumer}"
    js = broker.connection.jetstream()
    await js.add_consumer(
        EVENTS_STREAM,
        ConsumerConfig(
            durable_name=consumer,
            filter_subject=subject,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
        ),
    )
    for _ in range(5):
        await js.publish(subject, b"{}")
    subscription = await js.pull_subscribe_bind(consumer, EVENTS_STREAM)
    handed = await subscription.fetch(2, timeout=5)
    assert len(handed) == 2
    await subscription.unsubscribe()


async def test_consumer_pending_is_read_at_scrape_and_dropped_when_unknown(
    broker: NatsBroker, nats_url: str
) -> None:
    consumer = f"test-{uuid.uuid4().hex[:8]}"
    await _durable_with_pending(broker, consumer)
    await consumer_pending(broker, consumer)()
    assert _pending(consumer) == 5  # waiting and unacknowledged both
    # A consumer NATS does not know (deleted): no sample rather than a stale one.
    await broker.connection.jetstream().delete_consumer(EVENTS_STREAM, consumer)
    await consumer_pending(broker, consumer)()
    assert _pending(consumer) is None

    other = f"test-{uuid.uuid4().hex[:8]}"
    await _durable_with_pending(broker, other)
    stopped = create_broker(nats_url)
    await stopped.connect()
    await consumer_pending(stopped, other)()
    assert _pending(other) == 5
    await stopped.stop()
    # NATS unreachable: no sample either.
    await consumer_pending(stopped, other)()
    assert _pending(other) is None


async def test_outbox_pending_is_read_at_scrape_and_minus_one_when_unknown() -> None:
    async def size() -> int:
        return 7

    async def unreachable() -> int:
        raise ConnectionError("store down")

    await outbox_pending("issuer", size)()
    assert REGISTRY.get_sample_value("tessera_outbox_pending", {"owner": "issuer"}) == 7
    await outbox_pending("issuer", unreachable)()
    assert REGISTRY.get_sample_value("tessera_outbox_pending", {"owner": "issuer"}) == -1


def test_with_a_token_metrics_answer_only_its_bearer() -> None:
    token = "m" * 32
    with TestClient(_app(f"test-{uuid.uuid4().hex[:8]}", token)) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            refused = client.get("/metrics", headers=headers)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "tessera_" not in refused.text
        allowed = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert allowed.status_code == 200
        assert "tessera_http_requests_total" in allowed.text


def test_a_placeholder_metrics_token_is_refused() -> None:
    with pytest.raises(ValueError, match="placeholder"):
        ServiceSettings(metrics_token="changeme")


def test_in_production_metrics_are_served_only_behind_a_token() -> None:
    """The api and events ports are public: open metrics would tell anyone every tenant's
    traffic. Production without TESSERA_METRICS_TOKEN serves no /metrics at all."""
    production = {
        "environment": "production",
        "site_url": "https://passes.example.com",
        "wallet_url": "https://wallet.example.com",
    }
    for token, expected in ((None, 404), ("m" * 32, 401)):
        app = FastAPI()
        settings = ServiceSettings.model_validate({**production, "metrics_token": token})
        instrument(app, f"test-{uuid.uuid4().hex[:8]}", settings)
        with TestClient(app) as client:
            assert client.get("/metrics").status_code == expected
