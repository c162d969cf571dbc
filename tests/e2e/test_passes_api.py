"""End to end over HTTP: /v1/passes and the events endpoints (spec 2.2, 2.5, 3.1, 4.1, 6.1;
issue 2 parts 10 and 11). Events travel issuer -> JetStream -> events service, so every
check on them polls with a deadline.
"""

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx2
import pytest

from tests.support.api import (
    EVENT_KEYS,
    PASS_KEYS,
    assert_error,
    create_pass,
    create_template,
    event_types,
    ids,
    list_page,
    ok,
    page_forward,
    wait_for_events,
)
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

MISSING_PASS = "pass_0000000000000000000000"
MISSING_TMPL = "tmpl_0000000000000000000000"
URL_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass
class Ctx:
    client: httpx2.Client
    template_id: str
    base_url: str


@pytest.fixture
def ctx(stack: Stack) -> Iterator[Ctx]:
    """A fresh account (test key) with one template defining the fields seat and row."""
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as client:
        tmpl = create_template(client)
        yield Ctx(client=client, template_id=tmpl["id"], base_url=stack.base_url)


# --- create -------------------------------------------------------------------------------


def test_create_returns_the_pass_object(ctx: Ctx) -> None:
    pass_ = create_pass(
        ctx.client,
        ctx.template_id,
        holder_email="ada@example.com",
        holder_name="Ada Lovelace",
        field_values={"seat": "12A", "row": "7"},
        metadata={"order": 991, "tags": ["vip"], "nested": {"a": None}, "flag": True},
    )
    assert set(pass_) == PASS_KEYS
    assert pass_["id"].startswith("pass_")
    assert pass_["object"] == "pass"
    assert pass_["template_id"] == ctx.template_id
    assert pass_["mode"] == "test"
    assert pass_["holder_email"] == "ada@example.com"
    assert pass_["holder_name"] == "Ada Lovelace"
    assert pass_["field_values"] == {"seat": "12A", "row": "7"}
    assert pass_["metadata"] == {"order": 991, "tags": ["vip"], "nested": {"a": None}, "flag": True}
    assert pass_["voided"] is False
    assert pass_["voided_at"] is None
    assert pass_["created_via_api"] is True
    datetime.fromisoformat(pass_["created_at"])
    assert uuid.UUID(pass_["serial_number"]).version == 4
    assert URL_SAFE.match(pass_["short_id"])
    assert len(pass_["short_id"]) >= 12
    assert pass_["url"].startswith(ctx.base_url + "/")
    assert pass_["download_url"].startswith(ctx.base_url + "/")
    assert pass_["short_id"] in pass_["url"]
    assert pass_["short_id"] in pass_["download_url"]
    assert pass_["url"] != pass_["download_url"]
    assert ok(ctx.client.get(f"/v1/passes/{pass_['id']}")) == pass_


def test_google_save_url_redirects_to_googles_save_link(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id)
    assert pass_["google_save_url"] == f"{pass_['url']}/google"
    saved = ctx.client.get(pass_["google_save_url"], follow_redirects=False)
    assert saved.status_code == 302
    assert saved.headers["location"].startswith("https://pay.google.com/gp/v/save/")
    # Batch rows carry it too (their replies leave the long signed link itself out).
    batch = ok(
        ctx.client.post("/v1/passes/batch", json={"passes": [{"template_id": ctx.template_id}]})
    )
    row = batch["data"][0]["pass"]
    assert row["google_save_url"] == f"{row['url']}/google"


def test_create_with_only_a_template_id(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id)
    assert pass_["holder_email"] is None
    assert pass_["holder_name"] is None
    assert pass_["field_values"] == {}
    assert pass_["metadata"] == {}


def test_download_url_serves_the_signed_pkpass(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "1A"})
    with httpx2.Client() as anonymous:
        response = anonymous.get(pass_["download_url"])
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/vnd.apple.pkpass"
    assert response.content[:2] == b"PK"


def test_short_id_and_serial_number_are_unique(ctx: Ctx) -> None:
    passes = [create_pass(ctx.client, ctx.template_id) for _ in range(12)]
    assert len({p["id"] for p in passes}) == 12
    assert len({p["short_id"] for p in passes}) == 12
    assert len({p["serial_number"] for p in passes}) == 12
    assert len({p["url"] for p in passes}) == 12


def test_create_without_template_id_is_400(ctx: Ctx) -> None:
    assert_error(
        ctx.client.post("/v1/passes", json={"holder_name": "Ada"}),
        400,
        "invalid_request_error",
        param="template_id",
        code="parameter_missing",
    )


@pytest.mark.parametrize("template_id", [MISSING_TMPL, "tmpl_nope", "pass_0000000000000000000000"])
def test_create_from_an_unknown_template_is_404(ctx: Ctx, template_id: str) -> None:
    assert_error(
        ctx.client.post("/v1/passes", json={"template_id": template_id}), 404, "not_found_error"
    )


@pytest.mark.parametrize("email", ["not-an-email", "a@", "@example.com", "a b@example.com", ""])
def test_create_with_an_invalid_holder_email_is_400(ctx: Ctx, email: str) -> None:
    assert_error(
        ctx.client.post("/v1/passes", json={"template_id": ctx.template_id, "holder_email": email}),
        400,
        "invalid_request_error",
        param="holder_email",
    )


def test_create_with_an_unknown_field_key_is_400(ctx: Ctx) -> None:
    assert_error(
        ctx.client.post(
            "/v1/passes",
            json={"template_id": ctx.template_id, "field_values": {"seat": "1", "gate": "B"}},
        ),
        400,
        "invalid_request_error",
        param="field_values.gate",
    )
    assert list_page(ctx.client, "/v1/passes")["data"] == []


@pytest.mark.parametrize("value", [5, 1.5, True, None, ["1"], {"a": "b"}])
def test_create_with_a_non_string_field_value_is_400(ctx: Ctx, value: Any) -> None:
    assert_error(
        ctx.client.post(
            "/v1/passes", json={"template_id": ctx.template_id, "field_values": {"seat": value}}
        ),
        400,
        "invalid_request_error",
        param="field_values.seat",
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"field_values": ["seat"]}, "field_values"),
        ({"metadata": "x"}, "metadata"),
        ({"holder_name": 7}, "holder_name"),
        ({"template_id": 7}, "template_id"),
        ({"serial_number": "mine"}, "serial_number"),
    ],
)
def test_create_with_other_bad_values_is_400(ctx: Ctx, body: dict[str, Any], param: str) -> None:
    payload = {"template_id": ctx.template_id, **body}
    assert_error(
        ctx.client.post("/v1/passes", json=payload), 400, "invalid_request_error", param=param
    )


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_metadata_nesting_is_bounded(ctx: Ctx) -> None:
    """Metadata is any JSON value, nested at most 16 levels (MongoDB refuses past 100)."""
    pass_ = create_pass(ctx.client, ctx.template_id, metadata={"deep": nested(16)})
    assert pass_["metadata"] == {"deep": nested(16)}
    for depth in (17, 150, 400):
        body = {"template_id": ctx.template_id, "metadata": {"deep": nested(depth)}}
        assert_error(
            ctx.client.post("/v1/passes", json=body), 400, "invalid_request_error", param="metadata"
        )
        assert_error(
            ctx.client.patch(f"/v1/passes/{pass_['id']}", json={"metadata": {"x": nested(depth)}}),
            400,
            "invalid_request_error",
            param="metadata",
        )
    # Far deeper than the parser's recursion: still a 400 in the envelope.
    raw = b'{"template_id": "%s", "metadata": {"deep": %s%s}}' % (
        ctx.template_id.encode(),
        b"[" * 100_000,
        b"]" * 100_000,
    )
    response = ctx.client.post(
        "/v1/passes", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request_error")
    assert ids(list_page(ctx.client, "/v1/passes")) == [pass_["id"]]


def post_raw(ctx: Ctx, raw: bytes, path: str = "/v1/passes") -> httpx2.Response:
    return ctx.client.post(path, content=raw, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("metadata", "param"),
    [
        # Python's parser accepts NaN and Infinity; they are not JSON and would become null.
        (b'{"x": NaN}', "metadata.x"),
        (b'{"x": Infinity}', "metadata.x"),
        (b'{"x": -Infinity}', "metadata.x"),
        (b'{"x": [1, NaN]}', "metadata.x.1"),
        (b'{"x": 1e400}', "metadata.x"),
        # Integers beyond 64 bits cannot be stored.
        (b'{"x": 9223372036854775808}', "metadata.x"),
        (b'{"x": {"y": -9223372036854775809}}', "metadata.x.y"),
        # Lone surrogates are not Unicode text.
        (b'{"x": "\\ud800"}', "metadata.x"),
        (b'{"\\udfff": 1}', "metadata"),
        # BSON keys cannot hold NUL.
        (b'{"a\\u0000b": 1}', "metadata"),
        (b'{"x": {"\\u0000": 1}}', "metadata.x"),
    ],
)
def test_metadata_values_must_be_storable_json(ctx: Ctx, metadata: bytes, param: str) -> None:
    raw = b'{"template_id": "%s", "metadata": %s}' % (ctx.template_id.encode(), metadata)
    assert_error(post_raw(ctx, raw), 400, "invalid_request_error", param=param)
    pass_ = create_pass(ctx.client, ctx.template_id)
    raw = b'{"metadata": %s}' % metadata
    response = ctx.client.patch(
        f"/v1/passes/{pass_['id']}", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request_error", param=param)


def test_extreme_but_valid_numbers_are_kept(ctx: Ctx) -> None:
    metadata = {"max": 2**63 - 1, "min": -(2**63), "tiny": 5e-324, "big": 1.7e308}
    pass_ = create_pass(ctx.client, ctx.template_id, metadata=metadata)
    assert pass_["metadata"] == metadata
    assert ok(ctx.client.get(f"/v1/passes/{pass_['id']}"))["metadata"] == metadata


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"template_id": "\\ud800"}', "template_id"),
        (b'{"template_id": "%(t)s", "holder_name": "\\ud800"}', "holder_name"),
        (b'{"template_id": "%(t)s", "field_values": {"seat": "a\\udfffb"}}', "field_values.seat"),
        (b'{"template_id": "%(t)s", "field_values": {"\\ud800": "x"}}', "field_values"),
    ],
)
def test_lone_surrogates_are_400(ctx: Ctx, body: bytes, param: str) -> None:
    raw = body % {b"t": ctx.template_id.encode()}
    assert_error(post_raw(ctx, raw), 400, "invalid_request_error", param=param)
    assert list_page(ctx.client, "/v1/passes")["data"] == []


def test_unicode_text_round_trips(ctx: Ctx) -> None:
    text = "Zoë 🎫 東京 \u0000 end"
    pass_ = create_pass(
        ctx.client,
        ctx.template_id,
        holder_name=text,
        field_values={"seat": text},
        metadata={"key": text, "Zoë 🎫 東京": [text]},
    )
    fetched = ok(ctx.client.get(f"/v1/passes/{pass_['id']}"))
    assert fetched["holder_name"] == text
    assert fetched["field_values"] == {"seat": text}
    assert fetched["metadata"] == {"key": text, "Zoë 🎫 東京": [text]}


# --- list ---------------------------------------------------------------------------------


def test_list_is_newest_first_with_filters(ctx: Ctx) -> None:
    other_template = create_template(ctx.client, name="Other")["id"]
    a1 = create_pass(ctx.client, ctx.template_id, holder_email="a@example.com")["id"]
    b1 = create_pass(ctx.client, other_template, holder_email="b@example.com")["id"]
    a2 = create_pass(ctx.client, ctx.template_id, holder_email="b@example.com")["id"]
    n1 = create_pass(ctx.client, other_template)["id"]

    everything = list_page(ctx.client, "/v1/passes")
    assert ids(everything) == [n1, a2, b1, a1]
    assert everything["has_more"] is False
    assert all(set(item) == PASS_KEYS for item in everything["data"])

    by_template = list_page(ctx.client, "/v1/passes", template_id=ctx.template_id)
    assert ids(by_template) == [a2, a1]
    by_email = list_page(ctx.client, "/v1/passes", holder_email="b@example.com")
    assert ids(by_email) == [a2, b1]
    both = list_page(
        ctx.client, "/v1/passes", template_id=other_template, holder_email="b@example.com"
    )
    assert ids(both) == [b1]
    none = list_page(ctx.client, "/v1/passes", holder_email="nobody@example.com")
    assert none == {"object": "list", "data": [], "has_more": False}
    unknown = list_page(ctx.client, "/v1/passes", template_id=MISSING_TMPL)
    assert unknown["data"] == []

    limited = list_page(ctx.client, "/v1/passes", template_id=ctx.template_id, limit=1)
    assert (ids(limited), limited["has_more"]) == ([a2], True)


def test_list_with_an_invalid_holder_email_filter_is_400(ctx: Ctx) -> None:
    assert_error(
        ctx.client.get("/v1/passes", params={"holder_email": "nope"}),
        400,
        "invalid_request_error",
        param="holder_email",
    )


def test_list_limit_default_50_max_100(ctx: Ctx) -> None:
    made = [create_pass(ctx.client, ctx.template_id)["id"] for _ in range(51)]
    newest_first = list(reversed(made))
    page = list_page(ctx.client, "/v1/passes")
    assert (ids(page), page["has_more"]) == (newest_first[:50], True)
    page = list_page(ctx.client, "/v1/passes", limit=100)
    assert (ids(page), page["has_more"]) == (newest_first, False)
    page = list_page(ctx.client, "/v1/passes", limit=51)
    assert (ids(page), page["has_more"]) == (newest_first, False)


@pytest.mark.parametrize("limit", ["101", "0", "-5", "many"])
def test_list_limit_out_of_range_is_400(ctx: Ctx, limit: str) -> None:
    assert_error(
        ctx.client.get("/v1/passes", params={"limit": limit}),
        400,
        "invalid_request_error",
        param="limit",
    )


def test_cursors_page_through_every_pass_once(ctx: Ctx) -> None:
    made = [create_pass(ctx.client, ctx.template_id)["id"] for _ in range(23)]
    newest_first = list(reversed(made))
    for limit in (1, 5, 7, 23, 100):
        seen = page_forward(ctx.client, "/v1/passes", limit)
        assert seen == newest_first, limit
        assert len(set(seen)) == len(seen)

    # Backwards from the oldest with ending_before: every page newest first, none missed.
    collected: list[str] = []
    cursor = newest_first[-1]
    while True:
        page = list_page(ctx.client, "/v1/passes", limit=5, ending_before=cursor)
        collected = ids(page) + collected
        if not page["has_more"]:
            break
        cursor = page["data"][0]["id"]
    assert collected == newest_first[:-1]

    # Cursors respect the filter.
    filtered = page_forward(ctx.client, "/v1/passes", 4, template_id=ctx.template_id)
    assert filtered == newest_first


def test_list_cursor_with_a_wrong_prefix_is_400(ctx: Ctx) -> None:
    assert_error(
        ctx.client.get("/v1/passes", params={"starting_after": MISSING_TMPL}),
        400,
        "invalid_request_error",
        param="starting_after",
    )


# --- retrieve -----------------------------------------------------------------------------


def test_retrieve_unknown_or_malformed_pass_is_404(ctx: Ctx) -> None:
    for pass_id in (MISSING_PASS, "pass_", "tmpl_0000000000000000000000", "12345"):
        assert_error(ctx.client.get(f"/v1/passes/{pass_id}"), 404, "not_found_error")


# --- update -------------------------------------------------------------------------------


def test_patch_returns_the_updated_pass_and_records_an_updated_event(ctx: Ctx) -> None:
    pass_ = create_pass(
        ctx.client,
        ctx.template_id,
        field_values={"seat": "1A", "row": "3"},
        metadata={"keep": 1, "drop": "x"},
    )
    updated = ok(
        ctx.client.patch(
            f"/v1/passes/{pass_['id']}",
            json={"field_values": {"seat": "2B"}, "metadata": {"drop": None, "add": [1, 2]}},
        )
    )
    assert set(updated) == PASS_KEYS
    assert updated["id"] == pass_["id"]
    assert updated["field_values"] == {"seat": "2B", "row": "3"}
    assert updated["metadata"] == {"keep": 1, "add": [1, 2]}
    for key in ("short_id", "serial_number", "url", "download_url", "created_at", "template_id"):
        assert updated[key] == pass_[key]
    assert updated["voided"] is False
    assert ok(ctx.client.get(f"/v1/passes/{pass_['id']}")) == updated

    events = wait_for_events(ctx.client, pass_["id"], ["updated", "created"])
    assert all(set(event) == EVENT_KEYS for event in events)
    assert all(event["pass_id"] == pass_["id"] for event in events)
    assert all(event["object"] == "pass_event" for event in events)
    assert all(event["id"].startswith("psEvnt_") for event in events)


def test_patch_metadata_only_or_field_values_only(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "1A"})
    updated = ok(ctx.client.patch(f"/v1/passes/{pass_['id']}", json={"metadata": {"k": "v"}}))
    assert updated["metadata"] == {"k": "v"}
    assert updated["field_values"] == {"seat": "1A"}
    updated = ok(ctx.client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {}}))
    assert updated["field_values"] == {"seat": "1A"}
    assert updated["metadata"] == {"k": "v"}
    wait_for_events(ctx.client, pass_["id"], ["updated", "updated", "created"])


@pytest.mark.parametrize("body", [{}, {"field_values": None}, {"metadata": None}])
def test_patch_with_nothing_to_change_is_400(ctx: Ctx, body: dict[str, Any]) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id)
    assert_error(
        ctx.client.patch(f"/v1/passes/{pass_['id']}", json=body), 400, "invalid_request_error"
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"field_values": {"gate": "B"}}, "field_values.gate"),
        ({"field_values": {"seat": 3}}, "field_values.seat"),
        ({"metadata": ["x"]}, "metadata"),
        ({"holder_email": "not-an-email"}, "holder_email"),
    ],
)
def test_patch_with_a_bad_value_is_400(ctx: Ctx, body: dict[str, Any], param: str) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "1A"})
    assert_error(
        ctx.client.patch(f"/v1/passes/{pass_['id']}", json=body),
        400,
        "invalid_request_error",
        param=param,
    )
    assert ok(ctx.client.get(f"/v1/passes/{pass_['id']}")) == pass_


def test_patch_unknown_pass_is_404(ctx: Ctx) -> None:
    body = {"metadata": {"a": 1}}
    assert_error(ctx.client.patch(f"/v1/passes/{MISSING_PASS}", json=body), 404, "not_found_error")
    assert_error(ctx.client.patch("/v1/passes/bogus", json=body), 404, "not_found_error")


# --- void ---------------------------------------------------------------------------------


def test_delete_voids_once(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "1A"})
    voided = ok(ctx.client.delete(f"/v1/passes/{pass_['id']}"))
    assert set(voided) == PASS_KEYS
    assert voided["id"] == pass_["id"]
    assert voided["voided"] is True
    assert voided["voided_at"] is not None
    assert datetime.fromisoformat(voided["voided_at"]) >= datetime.fromisoformat(
        pass_["created_at"]
    )
    assert voided["field_values"] == pass_["field_values"]
    assert ok(ctx.client.get(f"/v1/passes/{pass_['id']}")) == voided
    # A pass is never deleted: it is still listed.
    assert pass_["id"] in ids(list_page(ctx.client, "/v1/passes"))
    wait_for_events(ctx.client, pass_["id"], ["voided", "created"])

    # Voiding again answers the voided pass unchanged and records nothing.
    again = ok(ctx.client.delete(f"/v1/passes/{pass_['id']}"))
    assert again == voided
    _live_update_barrier(ctx)
    assert event_types(ctx.client, pass_["id"]) == ["voided", "created"]


def _live_update_barrier(ctx: Ctx) -> None:
    """Wait until a later void's event is recorded. Voids and updates reach the events stream
    through the live-updates work queue (the events service pushes first), so a spurious
    `voided` or `updated` event sent before this one would have been recorded by now too."""
    marker = create_pass(ctx.client, ctx.template_id)
    ok(ctx.client.delete(f"/v1/passes/{marker['id']}"))
    wait_for_events(ctx.client, marker["id"], ["voided", "created"])


def test_patch_on_a_voided_pass_is_400(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "1A"})
    voided = ok(ctx.client.delete(f"/v1/passes/{pass_['id']}"))
    for body in ({"metadata": {"a": 1}}, {"field_values": {"seat": "2B"}}):
        assert_error(
            ctx.client.patch(f"/v1/passes/{pass_['id']}", json=body),
            400,
            "invalid_request_error",
        )
    assert ok(ctx.client.get(f"/v1/passes/{pass_['id']}")) == voided
    wait_for_events(ctx.client, pass_["id"], ["voided", "created"])
    _live_update_barrier(ctx)
    assert event_types(ctx.client, pass_["id"]) == ["voided", "created"]


def test_delete_unknown_pass_is_404(ctx: Ctx) -> None:
    assert_error(ctx.client.delete(f"/v1/passes/{MISSING_PASS}"), 404, "not_found_error")
    assert_error(ctx.client.delete(f"/v1/passes/{MISSING_TMPL}"), 404, "not_found_error")


# --- events -------------------------------------------------------------------------------


def test_pass_events_created_updated_voided_newest_first(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "1A"})
    wait_for_events(ctx.client, pass_["id"], ["created"])
    ok(ctx.client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "9Z"}}))
    ok(ctx.client.delete(f"/v1/passes/{pass_['id']}"))
    events = wait_for_events(ctx.client, pass_["id"], ["voided", "updated", "created"])
    event_ids = [event["id"] for event in events]
    assert event_ids == sorted(event_ids, reverse=True)
    times = [datetime.fromisoformat(event["created_at"]) for event in events]
    assert times == sorted(times, reverse=True)
    for event in events:
        assert set(event) == EVENT_KEYS
        assert event["object"] == "pass_event"
        assert event["pass_id"] == pass_["id"]
        assert isinstance(event["metadata"], dict)


def test_events_list_across_passes(ctx: Ctx) -> None:
    first = create_pass(ctx.client, ctx.template_id)
    second = create_pass(ctx.client, ctx.template_id)
    ok(ctx.client.patch(f"/v1/passes/{first['id']}", json={"metadata": {"n": 1}}))
    ok(ctx.client.delete(f"/v1/passes/{second['id']}"))
    expected = [
        (second["id"], "voided"),
        (first["id"], "updated"),
        (second["id"], "created"),
        (first["id"], "created"),
    ]

    def recorded() -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = list_page(ctx.client, "/v1/events")["data"]
        return data

    events = poll(recorded, lambda data: len(data) == len(expected), message="four events")
    # Newest first across passes, in the order the operations happened.
    assert [(e["pass_id"], e["type"]) for e in events] == expected
    event_ids = [event["id"] for event in events]
    assert event_ids == sorted(event_ids, reverse=True)

    # Cursors on events.
    assert page_forward(ctx.client, "/v1/events", 1) == event_ids
    assert page_forward(ctx.client, "/v1/events", 3) == event_ids
    back = list_page(ctx.client, "/v1/events", ending_before=event_ids[-1], limit=2)
    assert (ids(back), back["has_more"]) == (event_ids[1:3], True)
    one = list_page(ctx.client, f"/v1/passes/{second['id']}/events", limit=1)
    assert (one["data"][0]["type"], one["has_more"]) == ("voided", True)
    rest = list_page(
        ctx.client, f"/v1/passes/{second['id']}/events", starting_after=one["data"][0]["id"]
    )
    assert ([e["type"] for e in rest["data"]], rest["has_more"]) == (["created"], False)


def test_events_limit_default_100_max_200(ctx: Ctx) -> None:
    pass_ = create_pass(ctx.client, ctx.template_id, field_values={"seat": "0"})
    for i in range(100):
        ok(ctx.client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": str(i)}}))

    full = poll(
        lambda: list_page(ctx.client, "/v1/events", limit=200),
        lambda page: len(page["data"]) == 101,
        timeout=30,
        message="101 events",
    )
    assert full["has_more"] is False
    every = ids(full)
    assert every == sorted(every, reverse=True)
    assert full["data"][-1]["type"] == "created"

    for path in ("/v1/events", f"/v1/passes/{pass_['id']}/events"):
        default = list_page(ctx.client, path)
        assert (ids(default), default["has_more"]) == (every[:100], True), path
        at_max = list_page(ctx.client, path, limit=200)
        assert (ids(at_max), at_max["has_more"]) == (every, False), path
        exact = list_page(ctx.client, path, limit=101)
        assert (ids(exact), exact["has_more"]) == (every, False), path
        for limit in ("201", "0", "lots"):
            assert_error(
                ctx.client.get(path, params={"limit": limit}),
                400,
                "invalid_request_error",
                param="limit",
            )


def test_events_of_an_unknown_pass_are_404(ctx: Ctx) -> None:
    assert_error(ctx.client.get(f"/v1/passes/{MISSING_PASS}/events"), 404, "not_found_error")
    assert_error(ctx.client.get("/v1/passes/xyz/events"), 404, "not_found_error")


def test_events_cursor_with_a_wrong_prefix_is_400(ctx: Ctx) -> None:
    assert_error(
        ctx.client.get("/v1/events", params={"starting_after": MISSING_PASS}),
        400,
        "invalid_request_error",
        param="starting_after",
    )
