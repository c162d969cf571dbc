"""No v1 error has a null `code`, and no message leaks a library's wording (issue 16 section 2,
acceptance 3). Each case provokes one documented error over HTTP and names the code
docs/api-decisions.md gives it; tests/api/test_error_table.py checks the table against the code.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from tests.support.api import assert_error, create_pass, create_template, design, ok, template_body
from tests.support.stack import Account, Stack

pytestmark = pytest.mark.e2e

MISSING_PASS = "pass_0000000000000000000000"
# Library wording that must never reach a client, and a sentence ended twice.
LEAKS = ("Value error", "to extract fields from", "Input should be a valid dictionary", "..")


@dataclass
class Ctx:
    stack: Stack
    account: Account
    client: httpx2.Client
    template_id: str
    pass_id: str
    voided_id: str
    archived_id: str


@pytest.fixture(scope="module")
def ctx(stack: Stack) -> Iterator[Ctx]:
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as client:
        template_id = create_template(client)["id"]
        archived_id = create_template(client)["id"]
        ok(client.delete(f"/v1/templates/{archived_id}"))
        pass_id = create_pass(client, template_id)["id"]
        voided_id = create_pass(client, template_id)["id"]
        ok(client.delete(f"/v1/passes/{voided_id}"))
        yield Ctx(stack, account, client, template_id, pass_id, voided_id, archived_id)


def _anonymous(ctx: Ctx, method: str, path: str, **kwargs: Any) -> httpx2.Response:
    with ctx.stack.client() as client:
        return client.request(method, path, **kwargs)


def _as(ctx: Ctx, key: str, method: str, path: str) -> httpx2.Response:
    with ctx.stack.client(headers={"Authorization": f"Bearer {key}"}) as client:
        return client.request(method, path)


def _scanner_key(ctx: Ctx) -> str:
    key: str = ok(ctx.client.post("/v1/scanner_keys", json={"name": "Gate"}))["key"]
    return key


def _raw(ctx: Ctx, body: bytes, content_type: str = "application/json") -> httpx2.Response:
    return ctx.client.post("/v1/templates", content=body, headers={"Content-Type": content_type})


# (name, status, code, param or None when not checked, how to provoke it)
Case = tuple[str, int, str, str | None, Callable[[Ctx], httpx2.Response]]
CASES: list[Case] = [
    ("no key", 401, "missing_api_key", None, lambda c: _anonymous(c, "GET", "/v1/passes")),
    (
        "bad key",
        401,
        "invalid_api_key",
        None,
        lambda c: _as(c, "svc_test_nope", "GET", "/v1/passes"),
    ),
    (
        "live key on free plan",
        403,
        "live_mode_requires_paid_plan",
        None,
        lambda c: _as(c, c.account.live_key, "GET", "/v1/passes"),
    ),
    (
        "scanner key elsewhere",
        403,
        "scanner_key_not_allowed",
        None,
        lambda c: _as(c, _scanner_key(c), "GET", "/v1/passes"),
    ),
    ("unknown route", 404, "route_unknown", None, lambda c: c.client.get("/v1/nope")),
    ("wrong method", 405, "method_not_allowed", None, lambda c: c.client.put("/v1/passes")),
    (
        "missing pass",
        404,
        "resource_missing",
        None,
        lambda c: c.client.get(f"/v1/passes/{MISSING_PASS}"),
    ),
    ("wrong prefix", 404, "resource_missing", None, lambda c: c.client.get("/v1/passes/tmpl_x")),
    (
        "missing file",
        404,
        "resource_missing",
        None,
        lambda c: c.client.get("/static/scanner/nope.js"),
    ),
    ("not json", 400, "invalid_json", None, lambda c: _raw(c, b"{nope")),
    ("body not an object", 400, "parameter_invalid", None, lambda c: _raw(c, b"[]")),
    (
        "not json content",
        415,
        "unsupported_media_type",
        None,
        lambda c: _raw(c, b"name=x", "text/plain"),
    ),
    (
        "body too large",
        413,
        "body_too_large",
        None,
        lambda c: _raw(c, b'{"name": "' + b"x" * 2_000_000 + b'"}'),
    ),
    (
        "missing field",
        400,
        "parameter_missing",
        "template_id",
        lambda c: c.client.post("/v1/passes", json={}),
    ),
    (
        "unknown body field",
        400,
        "parameter_unknown",
        "colour",
        lambda c: c.client.post("/v1/passes", json={"template_id": c.template_id, "colour": 1}),
    ),
    (
        "unknown field_values key",
        400,
        "parameter_unknown",
        "field_values.shoe",
        lambda c: c.client.post(
            "/v1/passes", json={"template_id": c.template_id, "field_values": {"shoe": "42"}}
        ),
    ),
    (
        "unknown query parameter",
        400,
        "parameter_unknown",
        "status",
        lambda c: c.client.get("/v1/passes", params={"status": "voided"}),
    ),
    ("limit", 400, "parameter_invalid", "limit", lambda c: c.client.get("/v1/passes?limit=0")),
    (
        "cursor prefix",
        400,
        "parameter_invalid",
        "starting_after",
        lambda c: c.client.get("/v1/passes", params={"starting_after": "tmpl_x"}),
    ),
    (
        "both cursors",
        400,
        "parameter_invalid",
        "ending_before",
        lambda c: c.client.get(
            "/v1/passes", params={"starting_after": MISSING_PASS, "ending_before": MISSING_PASS}
        ),
    ),
    (
        "idempotency key length",
        400,
        "parameter_invalid",
        "Idempotency-Key",
        lambda c: c.client.post(
            "/v1/templates", json=template_body(), headers={"Idempotency-Key": "k" * 300}
        ),
    ),
    (
        "design value",
        400,
        "parameter_invalid",
        "design.colors.background",
        lambda c: c.client.post(
            "/v1/templates", json=template_body(design=design(colors={"background": "teal"}))
        ),
    ),
    (
        "design image",
        400,
        "parameter_invalid",
        None,
        lambda c: c.client.post(
            "/v1/templates", json=template_body(design=design(images={"logo": "bm90IGEgcG5n"}))
        ),
    ),
    (
        "transit_type",
        400,
        "parameter_invalid",
        "design.transit_type",
        lambda c: c.client.post(
            "/v1/templates",
            json=template_body(type="generic", apple_style="boardingPass"),
        ),
    ),
    (
        "barcode placeholder",
        400,
        "parameter_invalid",
        "design.barcode.message",
        lambda c: c.client.post(
            "/v1/templates",
            json=template_body(design=design(barcode={"message": "A-{serail_number}"})),
        ),
    ),
    (
        "field value too long",
        400,
        "parameter_too_large",
        "field_values.seat",
        lambda c: c.client.post(
            "/v1/passes", json={"template_id": c.template_id, "field_values": {"seat": "x" * 3000}}
        ),
    ),
    (
        "archived template",
        400,
        "template_archived",
        "template_id",
        lambda c: c.client.post("/v1/passes", json={"template_id": c.archived_id}),
    ),
    (
        "voided pass",
        400,
        "pass_voided",
        None,
        lambda c: c.client.patch(f"/v1/passes/{c.voided_id}", json={"metadata": {"a": "b"}}),
    ),
    (
        "webhook url",
        400,
        "url_invalid",
        "url",
        lambda c: c.client.post(
            "/v1/webhooks", json={"url": "ftp://example.com/hook", "events": ["pass.issued"]}
        ),
    ),
]


def _reused_key(ctx: Ctx) -> httpx2.Response:
    headers = {"Idempotency-Key": f"reuse-{ctx.pass_id}"}
    ok(
        ctx.client.patch(
            f"/v1/passes/{ctx.pass_id}", json={"metadata": {"a": "1"}}, headers=headers
        )
    )
    return ctx.client.patch(
        f"/v1/passes/{ctx.pass_id}", json={"metadata": {"a": "2"}}, headers=headers
    )


CASES.append(("idempotency key reused", 409, "idempotency_key_reused", None, _reused_key))


@pytest.mark.parametrize(
    ("name", "status", "code", "param", "provoke"), CASES, ids=[c[0] for c in CASES]
)
def test_every_error_has_its_code_and_a_clean_message(
    ctx: Ctx,
    name: str,
    status: int,
    code: str,
    param: str | None,
    provoke: Callable[[Ctx], httpx2.Response],
) -> None:
    response = provoke(ctx)
    error = assert_error(response, status, response.json().get("error", {}).get("type", "?"))
    assert error["code"] is not None, (name, error)
    assert error["code"] == code, (name, error)
    if param is not None:
        assert error["param"] == param, (name, error)
    for leak in LEAKS:
        assert leak not in error["message"], (name, error)


def test_an_unknown_barcode_placeholder_is_named_with_the_valid_ones(ctx: Ctx) -> None:
    body = template_body(design=design(barcode={"message": "A-{serail_number}"}))
    error = assert_error(
        ctx.client.post("/v1/templates", json=body),
        400,
        "invalid_request_error",
        param="design.barcode.message",
        code="parameter_invalid",
    )
    assert "{serail_number}" in error["message"], error
    assert "{serial_number}, {short_id}, {field_values.<key>}" in error["message"], error
    patched = ctx.client.patch(
        f"/v1/templates/{ctx.template_id}",
        json={"design": design(barcodes=[{"message": "{serial_number}"}, {"message": "{seat}"}])},
    )
    assert_error(patched, 400, "invalid_request_error", param="design.barcodes.1.message")
