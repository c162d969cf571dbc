"""End to end over HTTP: the five /v1/templates endpoints (spec 2.4, 3.3, 4.1; issue 2 part 9)."""

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx2
import pytest

from tests.support.api import (
    TEMPLATE_KEYS,
    assert_error,
    create_pass,
    create_template,
    design,
    ids,
    list_page,
    ok,
    template_body,
)
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

MISSING_TMPL = "tmpl_0000000000000000000000"


@pytest.fixture
def client(stack: Stack) -> Iterator[httpx2.Client]:
    """A client with the test key of a fresh account: every test starts with no templates."""
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as c:
        yield c


# --- create -------------------------------------------------------------------------------


def test_create_returns_the_template_object(client: httpx2.Client) -> None:
    body = template_body(name="Summer Gig")
    tmpl = ok(client.post("/v1/templates", json=body))
    assert set(tmpl) == TEMPLATE_KEYS
    assert tmpl["id"].startswith("tmpl_")
    assert tmpl["object"] == "template"
    assert tmpl["name"] == "Summer Gig"
    assert tmpl["type"] == "event"
    assert tmpl["apple_style"] == "eventTicket"
    assert tmpl["archived"] is False
    assert tmpl["require_download_link"] is False
    assert tmpl["design"]["organization_name"] == "Acme Events"
    assert [f["key"] for f in tmpl["design"]["fields"]] == ["seat", "row"]
    assert tmpl["design"]["colors"]["background"] == "#102030"
    created = datetime.fromisoformat(tmpl["created_at"])
    assert datetime.fromisoformat(tmpl["updated_at"]) == created
    assert "Request-Id" in client.get(f"/v1/templates/{tmpl['id']}").headers


@pytest.mark.parametrize("template_type", ["event", "membership", "coupon", "loyalty", "generic"])
def test_every_template_type_is_accepted(client: httpx2.Client, template_type: str) -> None:
    tmpl = create_template(client, type=template_type)
    assert tmpl["type"] == template_type


@pytest.mark.parametrize(
    ("apple_style", "extra"),
    [
        ("eventTicket", {}),
        ("generic", {}),
        ("storeCard", {}),
        ("coupon", {}),
        ("boardingPass", {"transit_type": "air"}),
    ],
)
def test_every_apple_style_is_accepted(
    client: httpx2.Client, apple_style: str, extra: dict[str, Any]
) -> None:
    tmpl = create_template(client, apple_style=apple_style, design=design(**extra))
    assert tmpl["apple_style"] == apple_style
    # A pass can be issued from every style.
    pass_ = create_pass(client, tmpl["id"], field_values={"seat": "1A"})
    assert pass_["template_id"] == tmpl["id"]


def test_require_download_link_is_stored(client: httpx2.Client) -> None:
    tmpl = create_template(client, require_download_link=True)
    assert tmpl["require_download_link"] is True


@pytest.mark.parametrize("field", ["name", "type", "apple_style", "design"])
def test_create_without_a_required_field_is_400_naming_it(
    client: httpx2.Client, field: str
) -> None:
    body = template_body()
    del body[field]
    assert_error(
        client.post("/v1/templates", json=body),
        400,
        "invalid_request_error",
        param=field,
        code="parameter_missing",
    )


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"type": "concert"}, "type"),
        ({"type": "Event"}, "type"),
        ({"apple_style": "pkpass"}, "apple_style"),
        ({"apple_style": "eventticket"}, "apple_style"),
        ({"name": ""}, "name"),
        ({"name": 42}, "name"),
        ({"design": "blue"}, "design"),
        ({"require_download_link": "sometimes"}, "require_download_link"),
    ],
)
def test_create_with_a_bad_value_is_400_naming_it(
    client: httpx2.Client, overrides: dict[str, Any], param: str
) -> None:
    assert_error(
        client.post("/v1/templates", json=template_body(**overrides)),
        400,
        "invalid_request_error",
        param=param,
    )


@pytest.mark.parametrize(
    ("design_overrides", "param"),
    [
        ({"colors": {"background": "red"}}, "design.colors.background"),
        ({"colors": {"foreground": "#12345"}}, "design.colors.foreground"),
        ({"organization_name": ""}, "design.organization_name"),
        ({"fields": [{"key": "1seat", "label": "Seat", "slot": "primary"}]}, "design.fields.0.key"),
        ({"fields": [{"key": "seat", "label": "Seat", "slot": "middle"}]}, "design.fields.0.slot"),
        ({"fields": [{"key": "seat", "slot": "primary"}]}, "design.fields.0.label"),
        ({"barcode": {"format": "qr-ish"}}, "design.barcode.format"),
        ({"transit_type": "rocket"}, "design.transit_type"),
        ({"sparkles": True}, "design.sparkles"),
        # A bad key names the object that holds it (pydantic said "fr..[key]").
        ({"localizations": {"fr": {"": "x"}}}, "design.localizations.fr"),
        ({"localizations": {"FR": {"Seat": "Place"}}}, "design.localizations"),
    ],
)
def test_create_with_a_bad_design_is_400_with_the_dotted_path(
    client: httpx2.Client, design_overrides: dict[str, Any], param: str
) -> None:
    assert_error(
        client.post("/v1/templates", json=template_body(design=design(**design_overrides))),
        400,
        "invalid_request_error",
        param=param,
    )


@pytest.mark.parametrize(
    ("design_overrides", "param"),
    [
        ({"expiration_date": 0}, "design.expiration_date"),
        ({"relevant_date": 1_700_000_000}, "design.relevant_date"),
        ({"expiration_date": "0"}, "design.expiration_date"),  # text, but no ISO 8601
        ({"sharing_prohibited": "yes"}, "design.sharing_prohibited"),
        ({"suppress_strip_shine": 1}, "design.suppress_strip_shine"),
        ({"max_distance": "100"}, "design.max_distance"),
        ({"locations": [{"latitude": "48.5", "longitude": 2.0}]}, "design.locations.0.latitude"),
        ({"locations": [{"latitude": 48.5, "longitude": True}]}, "design.locations.0.longitude"),
        (
            {"relevant_dates": [{"start_date": 0, "end_date": "2031-05-06T20:00:00Z"}]},
            "design.relevant_dates.0.start_date",
        ),
    ],
)
def test_a_design_value_of_the_wrong_type_is_400_not_coerced(
    client: httpx2.Client, design_overrides: dict[str, Any], param: str
) -> None:
    """pydantic's lax mode read 0 as 1970-01-01T00:00:00Z, "yes" as true, "100" as 100 and
    true as 1.0, and stored them: a client's mistake became a pass that expired in 1970."""
    assert_error(
        client.post("/v1/templates", json=template_body(design=design(**design_overrides))),
        400,
        "invalid_request_error",
        param=param,
    )


def test_a_redemption_date_written_as_a_number_is_400(client: httpx2.Client) -> None:
    body = template_body(design=design(), redemption={"valid_from": 0})
    assert_error(
        client.post("/v1/templates", json=body),
        400,
        "invalid_request_error",
        param="redemption.valid_from",
    )


def test_design_without_organization_name_is_400(client: httpx2.Client) -> None:
    bad = design()
    del bad["organization_name"]
    assert_error(
        client.post("/v1/templates", json=template_body(design=bad)),
        400,
        "invalid_request_error",
        param="design.organization_name",
        code="parameter_missing",
    )


def test_duplicate_field_keys_are_400(client: httpx2.Client) -> None:
    fields = [
        {"key": "seat", "label": "Seat", "slot": "primary"},
        {"key": "seat", "label": "Seat again", "slot": "back"},
    ]
    error = assert_error(
        client.post("/v1/templates", json=template_body(design=design(fields=fields))),
        400,
        "invalid_request_error",
    )
    assert error["param"] is not None
    assert error["param"].startswith("design")


@pytest.mark.parametrize(
    ("design_json", "param"),
    [
        (
            b'{"organization_name": "a", "description": "b", "images": {"icon": "\\ud800"}}',
            "design.images.icon",
        ),
        (b'{"organization_name": "\\ud800", "description": "b"}', "design.organization_name"),
        (b'{"organization_name": "a", "description": "b", "extra": NaN}', "design.extra"),
    ],
)
def test_unstorable_design_values_are_400(
    client: httpx2.Client, design_json: bytes, param: str
) -> None:
    raw = b'{"name": "n", "type": "event", "apple_style": "generic", "design": %s}' % design_json
    response = client.post(
        "/v1/templates", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request_error", param=param)


def test_boarding_pass_needs_a_transit_type(client: httpx2.Client) -> None:
    assert_error(
        client.post("/v1/templates", json=template_body(apple_style="boardingPass")),
        400,
        "invalid_request_error",
        param="design.transit_type",
    )
    # Nothing was created by the refused request.
    assert list_page(client, "/v1/templates")["data"] == []


def test_unknown_top_level_parameter_is_400(client: httpx2.Client) -> None:
    assert_error(
        client.post("/v1/templates", json=template_body(colour="blue")),
        400,
        "invalid_request_error",
        param="colour",
        code="parameter_unknown",
    )


def test_body_that_is_not_an_object_is_400(client: httpx2.Client) -> None:
    assert_error(client.post("/v1/templates", json=[1, 2]), 400, "invalid_request_error")
    assert_error(client.post("/v1/templates", json="x"), 400, "invalid_request_error")


def test_create_without_a_body_is_400(client: httpx2.Client) -> None:
    assert_error(client.post("/v1/templates"), 400, "invalid_request_error")


# --- retrieve -----------------------------------------------------------------------------


def test_retrieve_returns_what_create_returned(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    assert ok(client.get(f"/v1/templates/{tmpl['id']}")) == tmpl


def test_retrieve_unknown_template_is_404(client: httpx2.Client) -> None:
    assert_error(
        client.get(f"/v1/templates/{MISSING_TMPL}"),
        404,
        "not_found_error",
        code="resource_missing",
    )


@pytest.mark.parametrize("bad_id", ["pass_0000000000000000000000", "tmpl_short", "nonsense"])
def test_retrieve_with_a_wrong_id_shape_is_404(client: httpx2.Client, bad_id: str) -> None:
    assert_error(client.get(f"/v1/templates/{bad_id}"), 404, "not_found_error")


# --- list ---------------------------------------------------------------------------------


def test_list_is_newest_first_and_leaves_out_archived(client: httpx2.Client) -> None:
    made = [create_template(client, name=f"T{i}")["id"] for i in range(4)]
    ok(client.delete(f"/v1/templates/{made[1]}"))
    page = list_page(client, "/v1/templates")
    assert ids(page) == [made[3], made[2], made[0]]
    assert page["has_more"] is False
    assert all(item["archived"] is False for item in page["data"])
    assert all(set(item) == TEMPLATE_KEYS for item in page["data"])


def test_list_of_an_empty_account(client: httpx2.Client) -> None:
    assert list_page(client, "/v1/templates") == {"object": "list", "data": [], "has_more": False}


def test_list_limit_default_50_max_100(client: httpx2.Client) -> None:
    made = [create_template(client, name=f"T{i}")["id"] for i in range(52)]
    newest_first = list(reversed(made))
    page = list_page(client, "/v1/templates")
    assert ids(page) == newest_first[:50]
    assert page["has_more"] is True
    page = list_page(client, "/v1/templates", limit=100)
    assert ids(page) == newest_first
    assert page["has_more"] is False
    page = list_page(client, "/v1/templates", limit=52)
    assert ids(page) == newest_first
    assert page["has_more"] is False
    page = list_page(client, "/v1/templates", limit=51)
    assert ids(page) == newest_first[:51]
    assert page["has_more"] is True


@pytest.mark.parametrize("limit", ["101", "0", "-1", "1000", "ten", "1.5"])
def test_list_limit_out_of_range_is_400(client: httpx2.Client, limit: str) -> None:
    assert_error(
        client.get("/v1/templates", params={"limit": limit}),
        400,
        "invalid_request_error",
        param="limit",
    )


def test_list_has_more_is_exact(client: httpx2.Client) -> None:
    made = [create_template(client, name=f"T{i}")["id"] for i in range(3)]
    assert list_page(client, "/v1/templates", limit=3)["has_more"] is False
    assert list_page(client, "/v1/templates", limit=2)["has_more"] is True
    # An archived template does not count towards has_more.
    ok(client.delete(f"/v1/templates/{made[0]}"))
    assert list_page(client, "/v1/templates", limit=2)["has_more"] is False


def test_cursors_page_through_seven_templates(client: httpx2.Client) -> None:
    made = [create_template(client, name=f"T{i}")["id"] for i in range(7)]
    t = list(reversed(made))  # newest first: t[0] is the last one created

    first = list_page(client, "/v1/templates", limit=3)
    assert (ids(first), first["has_more"]) == (t[0:3], True)
    second = list_page(client, "/v1/templates", limit=3, starting_after=t[2])
    assert (ids(second), second["has_more"]) == (t[3:6], True)
    third = list_page(client, "/v1/templates", limit=3, starting_after=t[5])
    assert (ids(third), third["has_more"]) == (t[6:7], False)
    past_the_end = list_page(client, "/v1/templates", limit=3, starting_after=t[6])
    assert (ids(past_the_end), past_the_end["has_more"]) == ([], False)

    # ending_before pages back towards the newest, still newest first within a page.
    back = list_page(client, "/v1/templates", limit=3, ending_before=t[6])
    assert (ids(back), back["has_more"]) == (t[3:6], True)
    back = list_page(client, "/v1/templates", limit=3, ending_before=t[3])
    assert (ids(back), back["has_more"]) == (t[0:3], False)
    back = list_page(client, "/v1/templates", limit=3, ending_before=t[0])
    assert (ids(back), back["has_more"]) == ([], False)
    back = list_page(client, "/v1/templates", limit=10, ending_before=t[6])
    assert (ids(back), back["has_more"]) == (t[0:6], False)


def test_cursor_errors(client: httpx2.Client) -> None:
    made = create_template(client)["id"]
    assert_error(
        client.get("/v1/templates", params={"starting_after": made, "ending_before": made}),
        400,
        "invalid_request_error",
        param="ending_before",
    )
    assert_error(
        client.get("/v1/templates", params={"starting_after": "pass_0000000000000000000000"}),
        400,
        "invalid_request_error",
        param="starting_after",
    )
    assert_error(
        client.get("/v1/templates", params={"ending_before": "garbage"}),
        400,
        "invalid_request_error",
        param="ending_before",
    )


# --- update -------------------------------------------------------------------------------


def test_patch_returns_the_updated_template(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    new_design = design(
        organization_name="Acme Live", fields=[{"key": "gate", "label": "Gate", "slot": "header"}]
    )
    updated = ok(
        client.patch(
            f"/v1/templates/{tmpl['id']}",
            json={"name": "Renamed", "design": new_design, "require_download_link": True},
        )
    )
    assert set(updated) == TEMPLATE_KEYS
    assert updated["id"] == tmpl["id"]
    assert updated["object"] == "template"
    assert updated["name"] == "Renamed"
    assert updated["design"]["organization_name"] == "Acme Live"
    assert [f["key"] for f in updated["design"]["fields"]] == ["gate"]
    assert updated["require_download_link"] is True
    assert updated["type"] == tmpl["type"]
    assert updated["apple_style"] == tmpl["apple_style"]
    assert updated["created_at"] == tmpl["created_at"]
    assert datetime.fromisoformat(updated["updated_at"]) >= datetime.fromisoformat(
        tmpl["updated_at"]
    )
    assert ok(client.get(f"/v1/templates/{tmpl['id']}")) == updated
    # The new design governs new passes: the old field key is now unknown.
    assert_error(
        client.post("/v1/passes", json={"template_id": tmpl["id"], "field_values": {"seat": "1"}}),
        400,
        "invalid_request_error",
        param="field_values.seat",
    )
    create_pass(client, tmpl["id"], field_values={"gate": "B"})


def test_patch_with_only_a_name_keeps_everything_else(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    updated = ok(client.patch(f"/v1/templates/{tmpl['id']}", json={"name": "Only name"}))
    assert updated["name"] == "Only name"
    for key in ("design", "type", "apple_style", "archived", "require_download_link"):
        assert updated[key] == tmpl[key]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"name": ""}, "name"),
        ({"design": design(colors={"background": "red"})}, "design.colors.background"),
        ({"archived": "sometimes"}, "archived"),
        ({"type": "coupon"}, "type"),
        ({"apple_style": "coupon"}, "apple_style"),
    ],
)
def test_patch_with_a_bad_value_is_400(
    client: httpx2.Client, body: dict[str, Any], param: str
) -> None:
    tmpl = create_template(client)
    assert_error(
        client.patch(f"/v1/templates/{tmpl['id']}", json=body),
        400,
        "invalid_request_error",
        param=param,
    )
    assert ok(client.get(f"/v1/templates/{tmpl['id']}")) == tmpl


def test_patch_boarding_pass_design_still_needs_transit_type(client: httpx2.Client) -> None:
    tmpl = create_template(client, apple_style="boardingPass", design=design(transit_type="train"))
    assert_error(
        client.patch(f"/v1/templates/{tmpl['id']}", json={"design": design()}),
        400,
        "invalid_request_error",
        param="design.transit_type",
    )


def test_patch_unknown_template_is_404(client: httpx2.Client) -> None:
    assert_error(
        client.patch(f"/v1/templates/{MISSING_TMPL}", json={"name": "x"}), 404, "not_found_error"
    )
    assert_error(client.patch("/v1/templates/nope", json={"name": "x"}), 404, "not_found_error")


# --- delete / archive ---------------------------------------------------------------------


def test_delete_archives_and_answers_deleted(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    issued = create_pass(client, tmpl["id"], field_values={"seat": "A1"})

    assert ok(client.delete(f"/v1/templates/{tmpl['id']}")) == {"id": tmpl["id"], "deleted": True}

    # Still retrievable by id, marked archived; left out of the list.
    archived = ok(client.get(f"/v1/templates/{tmpl['id']}"))
    assert archived["archived"] is True
    assert archived["name"] == tmpl["name"]
    assert tmpl["id"] not in ids(list_page(client, "/v1/templates"))

    # No new pass from it: 400 naming template_id.
    assert_error(
        client.post("/v1/passes", json={"template_id": tmpl["id"]}),
        400,
        "invalid_request_error",
        param="template_id",
    )
    # Existing passes remain valid.
    still = ok(client.get(f"/v1/passes/{issued['id']}"))
    assert still["voided"] is False
    download = client.get(issued["download_url"])
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/vnd.apple.pkpass"


def test_delete_twice_answers_the_same(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    assert ok(client.delete(f"/v1/templates/{tmpl['id']}")) == {"id": tmpl["id"], "deleted": True}
    assert ok(client.delete(f"/v1/templates/{tmpl['id']}")) == {"id": tmpl["id"], "deleted": True}
    assert ok(client.get(f"/v1/templates/{tmpl['id']}"))["archived"] is True


def test_delete_unknown_template_is_404(client: httpx2.Client) -> None:
    assert_error(client.delete(f"/v1/templates/{MISSING_TMPL}"), 404, "not_found_error")
    assert_error(client.delete("/v1/templates/pass_0000000000000000000000"), 404, "not_found_error")


def test_patch_archived_true_archives(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    updated = ok(client.patch(f"/v1/templates/{tmpl['id']}", json={"archived": True}))
    assert updated["archived"] is True
    assert tmpl["id"] not in ids(list_page(client, "/v1/templates"))
    assert_error(
        client.post("/v1/passes", json={"template_id": tmpl["id"]}),
        400,
        "invalid_request_error",
        param="template_id",
    )


def test_patch_archived_false_unarchives(client: httpx2.Client) -> None:
    """Our documented decision: PATCH archived=false brings an archived template back."""
    tmpl = create_template(client)
    ok(client.delete(f"/v1/templates/{tmpl['id']}"))
    restored = ok(client.patch(f"/v1/templates/{tmpl['id']}", json={"archived": False}))
    assert restored["archived"] is False
    assert ok(client.get(f"/v1/templates/{tmpl['id']}"))["archived"] is False
    assert tmpl["id"] in ids(list_page(client, "/v1/templates"))
    create_pass(client, tmpl["id"], field_values={"seat": "B2"})


def test_archived_template_can_still_be_patched(client: httpx2.Client) -> None:
    tmpl = create_template(client)
    ok(client.delete(f"/v1/templates/{tmpl['id']}"))
    renamed = ok(client.patch(f"/v1/templates/{tmpl['id']}", json={"name": "Retired"}))
    assert renamed["name"] == "Retired"
    assert renamed["archived"] is True


def test_a_barcode_must_name_a_field_of_the_design(client: httpx2.Client) -> None:
    """No pass could carry a value for another key, so its barcode would never show."""
    undefined = design(barcode={"format": "qr", "message": "T-{field_values.ticket_code}"})
    error = assert_error(
        client.post("/v1/templates", json=template_body(design=undefined)),
        400,
        "invalid_request_error",
        param="design.barcode.message",
    )
    assert "ticket_code" in error["message"]
    fields = [{"key": "ticket_code", "label": "Code", "slot": "back"}]
    defined = design(barcode={"format": "qr", "message": "T-{field_values.ticket_code}"})
    created = ok(
        client.post("/v1/templates", json=template_body(design={**defined, "fields": fields}))
    )
    # A PATCH that removes the field the barcode reads is refused too.
    removed = client.patch(f"/v1/templates/{created['id']}", json={"design": defined})
    assert_error(removed, 400, "invalid_request_error", param="design.barcode.message")


def test_a_barcode_its_format_cannot_carry_is_refused(client: httpx2.Client) -> None:
    """Wallet would issue the pass and draw no barcode: refused with the template, or with the
    value that makes it too long."""
    cyrillic = design(barcode={"format": "code128", "message": "Билет {serial_number}"})
    refused = client.post("/v1/templates", json=template_body(design=cyrillic))
    error = assert_error(refused, 400, "invalid_request_error", param="design.barcode.message")
    assert "Latin-1" in error["message"]
    fields = [{"key": "note", "label": "Note", "slot": "back"}]
    pdf417 = {
        **design(barcode={"format": "pdf417", "message": "{field_values.note}"}),
        "fields": fields,
    }
    template = ok(client.post("/v1/templates", json=template_body(design=pdf417)))
    long_note = {"template_id": template["id"], "field_values": {"note": "x" * 1001}}
    assert_error(
        client.post("/v1/passes", json=long_note),
        400,
        "invalid_request_error",
        param="field_values.note",
    )
    made = ok(client.post("/v1/passes", json={**long_note, "field_values": {"note": "short"}}))
    patched = client.patch(f"/v1/passes/{made['id']}", json={"field_values": {"note": "x" * 1001}})
    assert_error(patched, 400, "invalid_request_error", param="field_values.note")
