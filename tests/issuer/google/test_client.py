"""The REST client against the local fake of Google (real HTTP, Google's shapes)."""

import json
from dataclasses import replace

import pytest

from services.issuer.google.client import (
    WalletApiError,
    WalletRestClient,
    WalletUnavailable,
)
from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import vertical_for
from tessera.processes import free_port
from tests.issuer.google.samples import LOGO_URL, make_design, sample_class, sample_object
from tests.support.fake_google import WALLET_PREFIX, FakeGoogle


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _client(
    identity: GoogleIdentity, fake: FakeGoogle, clock: _Clock | None = None
) -> WalletRestClient:
    return WalletRestClient(
        identity,
        api_base_url=fake.api_base_url,
        token_uri=fake.token_uri,
        clock=clock or _Clock(),
    )


async def test_upsert_class_inserts_then_patches(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    resource = sample_class(identity, "event")
    path = f"{WALLET_PREFIX}/eventTicketClass"
    async with _client(identity, fake_google) as client:
        inserted = await client.upsert_class("eventTicket", resource)
        changed = sample_class(identity, "event", make_design(description="Autumn Festival"))
        patched = await client.upsert_class("eventTicket", changed)

    assert inserted["id"] == resource["id"]
    assert patched["eventName"]["defaultValue"]["value"] == "Autumn Festival"
    stored = fake_google.classes[resource["id"]]
    assert stored["eventName"]["defaultValue"]["value"] == "Autumn Festival"
    assert fake_google.requests == [
        ("GET", f"{path}/{resource['id']}"),
        ("POST", path),
        ("GET", f"{path}/{resource['id']}"),
        ("PUT", f"{path}/{resource['id']}"),
    ]


async def test_insert_race_falls_back_to_update(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    resource = sample_class(identity, "coupon")
    # Another issuer process inserted the class after our GET answered 404.
    fake_google.classes[resource["id"]] = {**resource, "title": "old"}
    fake_google.stale_reads.add(resource["id"])
    async with _client(identity, fake_google) as client:
        await client.upsert_class("offer", resource)

    assert [method for method, _ in fake_google.requests] == ["GET", "POST", "PUT"]
    assert fake_google.classes[resource["id"]]["title"] == resource["title"]


@pytest.mark.parametrize("template_type", ["event", "membership", "coupon", "generic"])
async def test_object_lifecycle_for_every_vertical(
    identity: GoogleIdentity, fake_google: FakeGoogle, template_type: str
) -> None:
    vertical = vertical_for(template_type)
    resource = sample_object(identity, template_type)
    async with _client(identity, fake_google) as client:
        await client.upsert_class(vertical, sample_class(identity, template_type))
        await client.upsert_object(vertical, resource)
        updated = sample_object(identity, template_type, field_values={"seat": "14C"})
        await client.upsert_object(vertical, updated)
        voided = sample_object(identity, template_type, field_values={"seat": "14C"}, voided=True)
        patched = await client.patch_object(vertical, voided)

    stored = fake_google.objects[resource["id"]]
    assert stored["state"] == "INACTIVE"
    # A coupon's holder module comes first (Google shows ten).
    assert {"id": "seat", "header": "Seat", "body": "14C"} in stored["textModulesData"]
    assert patched == stored
    assert [method for method, _ in fake_google.requests].count("POST") == 2  # class + object


async def test_an_upsert_replaces_the_object_so_removed_fields_are_gone(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    """A holder removed from the pass (a PATCH to null, a redaction) must not stay at Google:
    its patch method keeps the fields a body leaves out."""
    async with _client(identity, fake_google) as client:
        await client.upsert_class("generic", sample_class(identity, "generic"))
        held = sample_object(identity, "generic", holder_name="Ada Lovelace")
        await client.upsert_object("generic", held)
        assert "Ada Lovelace" in json.dumps(fake_google.objects[held["id"]])
        erased = sample_object(identity, "generic", holder_name=None, holder_email=None)
        await client.upsert_object("generic", erased)

    assert "Ada Lovelace" not in json.dumps(fake_google.objects[held["id"]])


async def test_one_token_for_many_calls(identity: GoogleIdentity, fake_google: FakeGoogle) -> None:
    async with _client(identity, fake_google) as client:
        await client.upsert_class("generic", sample_class(identity, "generic"))
        for holder in ("A", "B", "C"):
            await client.upsert_object(
                "generic", sample_object(identity, "generic", holder_name=holder)
            )

    assert fake_google.token_requests == 1
    assert len(fake_google.requests) == 8  # GET, then POST or PUT, per upsert


async def test_token_renewed_shortly_before_expiry(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    clock = _Clock()
    resource = sample_class(identity, "generic")
    async with _client(identity, fake_google, clock) as client:
        await client.upsert_class("generic", resource)
        clock.now += 3599 - 61  # the fake's tokens live 3599 s; renewal is due 60 s early
        await client.upsert_class("generic", resource)
        assert fake_google.token_requests == 1
        clock.now += 2
        await client.upsert_class("generic", resource)

    assert fake_google.token_requests == 2


async def test_revoked_token_is_replaced_once(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    resource = sample_class(identity, "coupon")
    async with _client(identity, fake_google) as client:
        await client.upsert_class("offer", resource)
        fake_google.revoke_tokens()
        assert (await client.upsert_class("offer", resource))["id"] == resource["id"]

    assert fake_google.token_requests == 2


async def test_google_error_is_typed(identity: GoogleIdentity, fake_google: FakeGoogle) -> None:
    never_saved = sample_object(identity, "loyalty")
    missing = never_saved["id"]
    async with _client(identity, fake_google) as client:
        with pytest.raises(WalletApiError) as not_found:
            await client.patch_object("loyalty", never_saved)
        with pytest.raises(WalletApiError) as no_class:
            await client.upsert_object("loyalty", sample_object(identity, "loyalty"))

    assert not_found.value.status == 404
    assert not_found.value.message == f"Resource not found: {missing}"
    assert not_found.value.reason == "resourceNotFound"
    assert no_class.value.status == 400
    assert "does not exist" in no_class.value.message
    assert no_class.value.reason == "invalidResource"


async def test_resource_google_would_refuse_is_refused(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    bad = {**sample_class(identity, "coupon"), "titel": "typo"}
    async with _client(identity, fake_google) as client:
        with pytest.raises(WalletApiError, match="titel") as refused:
            await client.upsert_class("offer", bad)
    assert refused.value.status == 400


async def test_unknown_service_account_gets_invalid_grant(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    stranger = replace(identity, client_email="other@acme.iam.gserviceaccount.com")
    async with _client(stranger, fake_google) as client:
        with pytest.raises(WalletApiError) as refused:
            await client.upsert_class("generic", sample_class(identity, "generic"))

    assert refused.value.status == 400
    assert refused.value.reason == "invalid_grant"
    assert fake_google.requests == []


async def test_unreachable_google_is_unavailable(identity: GoogleIdentity) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    client = WalletRestClient(identity, api_base_url=closed, token_uri=f"{closed}/token")
    try:
        with pytest.raises(WalletUnavailable, match="ConnectError"):
            await client.upsert_class("generic", {"id": "1.a"})
    finally:
        await client.aclose()


async def test_arguments_are_checked(identity: GoogleIdentity) -> None:
    async with WalletRestClient(identity) as client:
        with pytest.raises(ValueError, match="vertical must be one of"):
            await client.upsert_class("flight", {"id": "1.a"})


async def test_a_class_update_keeps_what_the_console_set_and_drops_what_the_design_dropped(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    """Google's update (PUT) replaces the whole class: the fields an operator set in the Wallet
    console (Smart Tap, links) must survive a design change, and a logo the design no longer
    has must not."""
    with_logo = sample_class(identity, "event", logo_url=LOGO_URL)
    console = {
        "redemptionIssuers": ["3388000000012345678"],
        "enableSmartTap": True,
        "linksModuleData": {"uris": [{"uri": "https://example.com/help", "description": "Help"}]},
    }
    async with _client(identity, fake_google) as client:
        await client.upsert_class("eventTicket", with_logo)
        stored = fake_google.classes[with_logo["id"]]
        fake_google.classes[with_logo["id"]] = {**stored, **console, "review": {"comments": "ok"}}
        changed = sample_class(identity, "event", make_design(description="Autumn Festival"))
        updated = await client.upsert_class("eventTicket", changed)

    assert "logo" in with_logo
    assert "logo" not in changed
    assert {key: updated.get(key) for key in console} == console
    assert "logo" not in updated
    assert updated["eventName"]["defaultValue"]["value"] == "Autumn Festival"
    assert "review" not in updated  # Google's own, not sent back
