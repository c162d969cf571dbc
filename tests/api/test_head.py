"""HEAD as GET (services/api/head.py), in a small app: counted under the route it served
(over HTTP against the whole stack: tests/e2e/test_head.py)."""

import uuid

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.api.head import HeadAsGet
from shared.metrics import instrument
from shared.settings import ServiceSettings


def _app(service: str) -> FastAPI:
    router = APIRouter(prefix="/v1")

    @router.get("/passes/{pass_id}")
    async def get_pass(pass_id: str) -> dict[str, str]:
        return {"id": pass_id}

    app = FastAPI()
    app.include_router(router)
    app.add_middleware(HeadAsGet)
    instrument(app, service, ServiceSettings())
    return app


def test_a_head_is_counted_under_the_route_that_served_it() -> None:
    """It was counted as `unmatched`: the router wrote the route into the GET's copy of the
    scope, not the one the metrics read."""
    service = f"test-{uuid.uuid4().hex[:8]}"
    with TestClient(_app(service)) as client:
        head = client.head("/v1/passes/pass_secret123")
        assert (head.status_code, head.content) == (200, b"")
        scraped = client.get("/metrics").text
    counted = {
        (s.labels["method"], s.labels["route"], s.labels["status"])
        for family in text_string_to_metric_families(scraped)
        for s in family.samples
        if s.name == "tessera_http_requests_total" and s.labels.get("service") == service
    }
    assert counted == {("HEAD", "/v1/passes/{pass_id}", "200")}
