"""Observability on the whole stack: every replica's /metrics parsed as Prometheus text, and JSON
log lines that carry the request and account ids but never a key."""

import json
import re
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.api import create_pass, create_template, ok
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from tests.support.webhooks import create_webhook, settled

pytestmark = pytest.mark.e2e
# An id or a token of any kind (shared/ids.py), as opposed to a template's "{pass_id}".
ANY_ID = re.compile(r"\b(acct|key|pass|tmpl|whk|whd|pdl|req|cmd)_[A-Za-z0-9]{6,}")


@pytest.fixture(scope="module")
def stack(own_stack: Stack) -> Stack:
    """A stack of its own: its tests count process-wide metrics exactly (one more pass issued,
    one more delivery), which another module's traffic would change."""
    return own_stack


def _samples(stack: Stack, service: str) -> list[Sample]:
    """Every sample of every replica of `service` (each process has its own registry)."""
    found: list[Sample] = []
    for member in stack.members(service):
        url = f"http://{stack.host}:{member.port(stack.api_port)}/metrics"
        response = httpx2.get(url, timeout=10.0)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        for family in text_string_to_metric_families(response.text):
            found.extend(family.samples)
    return found


def _total(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(
        sample.value
        for sample in samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def test_api_counts_requests_by_route_template_and_never_by_path(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client)
        created = create_pass(client, template["id"])
        ok(client.get(f"/v1/passes/{created['id']}"))
        link = ok(client.post(f"/v1/passes/{created['id']}/download-links"))
        token = link["url"].rsplit("/", 1)[-1]
        assert client.get(f"/l/{token}").status_code == 200
        assert client.get(f"/p/{created['short_id']}/pass.pkpass").status_code == 200
        assert client.get("/nothing/here").status_code == 404

    def settled_samples() -> list[Sample]:
        return _samples(stack, "api")

    requests = "tessera_http_requests_total"
    samples = poll(
        settled_samples,
        lambda found: (
            _total(found, requests, route="/l/{token}", status="200") >= 1
            and _total(found, requests, route="unmatched", status="404") >= 1
        ),
    )
    get_pass = {"service": "api", "method": "GET", "route": "/v1/passes/{pass_id}"}
    assert _total(samples, requests, status="200", **get_pass) >= 1
    assert _total(samples, requests, method="POST", route="/v1/passes", status="200") >= 1
    assert _total(samples, requests, route="/p/{short_id}/pass.pkpass", status="200") >= 1
    duration = "tessera_http_request_duration_seconds_count"
    assert _total(samples, duration, status="200", **get_pass) >= 1
    raw = (created["id"], created["short_id"], token, account.test_key, account.id)
    values = {value for sample in samples for value in sample.labels.values()}
    assert not [value for value in values if any(secret in value for secret in raw)]
    assert not [value for value in values if ANY_ID.search(value)]


def test_issuer_counts_issued_passes_once_and_times_the_pkpass(stack: Stack) -> None:
    before = _samples(stack, "issuer")
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client)
        body = {"template_id": template["id"]}
        key = {"Idempotency-Key": "metrics-once"}
        first = ok(client.post("/v1/passes", json=body, headers=key))
        assert ok(client.post("/v1/passes", json=body, headers=key))["id"] == first["id"]

    issued = "tessera_passes_issued_total"
    builds = "tessera_pkpass_build_seconds_count"
    # The issuer counts after it committed, which the api's answer already waited for.
    after = _samples(stack, "issuer")
    assert _total(after, issued, mode="test") == _total(before, issued, mode="test") + 1
    assert _total(after, builds) >= _total(before, builds) + 1
    assert _total(after, "tessera_pkpass_build_seconds_sum") > 0


def test_issuer_reports_its_outbox_draining_to_zero(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        create_pass(client, create_template(client)["id"])
    samples = poll(
        lambda: _samples(stack, "issuer"),
        lambda found: any(s.name == "tessera_outbox_pending" and s.value == 0 for s in found),
    )
    values = [s.value for s in samples if s.name == "tessera_outbox_pending"]
    # One sample per replica, each the shared outbox's size: never the -1 of a failed read.
    assert len(values) == len(stack.members("issuer"))
    assert min(values) >= 0


@pytest.mark.parametrize("service", ["events", "webhooks"])
def test_each_consumer_reports_its_pending_messages(stack: Stack, service: str) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        create_pass(client, create_template(client)["id"])
    pending = "tessera_jetstream_consumer_pending"
    samples = poll(
        lambda: _samples(stack, service),
        # Every replica reads the same durable consumer; it drains to 0 once the event is in.
        lambda found: (
            any(s.name == pending for s in found) and _total(found, pending, consumer=service) == 0
        ),
    )
    consumers = {s.labels["consumer"] for s in samples if s.name == pending}
    assert consumers == {service}


def test_webhook_deliveries_are_counted_by_status(stack: Stack, receiver: Receiver) -> None:
    delivered = "tessera_webhook_deliveries_total"
    before = _total(_samples(stack, "webhooks"), delivered, status="delivered")
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/metrics-hook"), ["pass.issued"])
        create_pass(client, create_template(client)["id"])
        settled(client, hook["id"], 1)
    poll(
        lambda: _total(_samples(stack, "webhooks"), delivered, status="delivered"),
        lambda now: now == before + 1,
    )


def _log_lines(stack: Stack, service: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stack.log_text(service).splitlines() if line]


def test_log_lines_of_authenticated_requests_carry_request_and_account_ids(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        response = client.post("/v1/templates", json={"name": "x"})
        assert response.status_code == 400
        created = client.post("/v1/passes", json={"template_id": create_template(client)["id"]})
    request_id = response.headers["Request-Id"]
    issue_id = created.headers["Request-Id"]

    def lines_of(service: str, rid: str) -> list[dict[str, Any]]:
        return [line for line in _log_lines(stack, service) if line.get("request_id") == rid]

    api_lines = poll(lambda: lines_of("api", request_id), bool)
    assert {line.get("account_id") for line in api_lines} == {account.id}
    issuer_lines = poll(lambda: lines_of("issuer", issue_id), bool)
    assert {line.get("account_id") for line in issuer_lines} == {account.id}
    for service in ("api", "issuer", "events", "webhooks"):
        text = stack.log_text(service)
        for secret in (account.test_key, account.live_key, stack.admin_token):
            assert secret not in text
