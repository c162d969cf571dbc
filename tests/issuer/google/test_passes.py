"""Issuing to Google Wallet end to end: fat links without a client, skinny ones with the fake."""

import base64
import json
from datetime import UTC, datetime
from typing import Any

from google.auth import crypt

from services.issuer.google.client import WalletRestClient
from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.passes import (
    GoogleWallet,
    object_digest,
    save_link,
    sync_object,
    sync_template,
)
from services.issuer.google.savelink import SAVE_URL_PREFIX
from shared.models import PassRecord, TemplateRecord
from tests.issuer.google.samples import (
    CALLBACK_URL,
    PASS_ID,
    PLACEHOLDER_LOGO_URL,
    SERIAL,
    SHORT_ID,
    TEMPLATE_ID,
    make_design,
)
from tests.support.fake_google import FakeGoogle

ORIGINS = ["https://tessera.example.com"]
NOW = datetime(2026, 5, 1, tzinfo=UTC)


def _template(template_type: str = "membership", **design: Any) -> TemplateRecord:
    return TemplateRecord.model_validate(
        {
            "_id": TEMPLATE_ID,
            "account_id": "acct_x",
            "mode": "live",
            "created_at": NOW,
            "updated_at": NOW,
            "name": "Members",
            "type": template_type,
            "apple_style": "storeCard",
            "design": make_design(**design).model_dump(mode="json"),
        }
    )


def _pass(**changes: Any) -> PassRecord:
    document = {
        "_id": PASS_ID,
        "account_id": "acct_x",
        "mode": "live",
        "created_at": NOW,
        "updated_at": NOW,
        "short_id": SHORT_ID,
        "template_id": TEMPLATE_ID,
        "serial_number": SERIAL,
        "holder_name": "Ada Lovelace",
        "field_values": {"seat": "12A"},
        "authentication_token": "t" * 32,
        **changes,
    }
    return PassRecord.model_validate(document)


def _payload(identity: GoogleIdentity, url: str) -> dict[str, Any]:
    token = url.removeprefix(SAVE_URL_PREFIX)
    signed_part, _, signature = token.rpartition(".")
    raw_signature = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    verifier = crypt.RSAVerifier.from_string(identity.public_key_pem())
    assert verifier.verify(signed_part.encode(), raw_signature)
    claims_part = signed_part.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(claims_part + "=" * (-len(claims_part) % 4)))
    assert claims["origins"] == ORIGINS
    payload: dict[str, Any] = claims["payload"]
    return payload


async def test_without_a_client_the_link_is_fat(identity: GoogleIdentity) -> None:
    wallet = GoogleWallet(identity, None, ORIGINS, PLACEHOLDER_LOGO_URL)

    url = save_link(wallet, _template(), _pass(), now=NOW)

    payload = _payload(identity, url)
    assert [o["id"] for o in payload["loyaltyObjects"]] == [f"{identity.issuer_id}.{PASS_ID}"]
    assert payload["loyaltyObjects"][0]["accountName"] == "Ada Lovelace"
    assert payload["loyaltyClasses"][0]["programLogo"]["sourceUri"]["uri"] == (PLACEHOLDER_LOGO_URL)
    # Nothing to push anywhere without a client.
    await sync_template(wallet, _template())
    await sync_object(wallet, _template(), _pass(voided=True))


async def test_with_a_client_the_link_is_skinny_and_made_without_calling_google(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    async with WalletRestClient(
        identity, api_base_url=fake_google.api_base_url, token_uri=fake_google.token_uri
    ) as client:
        wallet = GoogleWallet(identity, client, ORIGINS, PLACEHOLDER_LOGO_URL)
        template = _template("event")
        object_id = f"{identity.issuer_id}.{PASS_ID}"
        class_id = f"{identity.issuer_id}.{TEMPLATE_ID}"

        # Before the Google step first synced it, ids alone would open Google's error page:
        # the link carries the class and the object.
        pending = _payload(identity, save_link(wallet, template, _pass(), now=NOW))
        assert [o["id"] for o in pending["eventTicketObjects"]] == [object_id]
        assert [c["id"] for c in pending["eventTicketClasses"]] == [class_id]
        sent = object_digest(wallet, template, _pass())
        synced = _pass(google_status="synced", google_object_digest=sent)
        url = save_link(wallet, template, synced, now=NOW)
        assert _payload(identity, url) == {
            "eventTicketObjects": [{"id": object_id, "classId": class_id}]
        }
        assert fake_google.requests == []  # the Google step upserts (google/sync.py)
        # Another object than the one at Google (another issuer id, say): fat again.
        elsewhere = _pass(google_status="synced", google_object_digest="another object")
        assert "eventTicketClasses" in _payload(identity, save_link(wallet, template, elsewhere))

        await sync_template(wallet, template)
        await sync_object(wallet, template, _pass())
        assert fake_google.objects[object_id]["ticketHolderName"] == "Ada Lovelace"
        await sync_object(wallet, template, _pass(field_values={"seat": "14C"}))
        assert fake_google.objects[object_id]["textModulesData"][0]["body"] == "14C"

        await sync_template(wallet, _template("event", description="Autumn Festival"))
        event_name = fake_google.classes[class_id]["eventName"]["defaultValue"]["value"]
        assert event_name == "Autumn Festival"

        await sync_object(wallet, template, _pass(voided=True))
        assert fake_google.objects[object_id]["state"] == "INACTIVE"


async def test_classes_carry_the_callback_url_in_links_and_upserts(
    identity: GoogleIdentity, fake_google: FakeGoogle
) -> None:
    fat = GoogleWallet(identity, None, ORIGINS, PLACEHOLDER_LOGO_URL, callback_url=CALLBACK_URL)
    payload = _payload(identity, save_link(fat, _template(), _pass(), now=NOW))
    assert payload["loyaltyClasses"][0]["callbackOptions"] == {"url": CALLBACK_URL}
    async with WalletRestClient(
        identity, api_base_url=fake_google.api_base_url, token_uri=fake_google.token_uri
    ) as client:
        wallet = GoogleWallet(identity, client, ORIGINS, callback_url=CALLBACK_URL)
        await sync_template(wallet, _template("event", description="Autumn Festival"))
    stored = fake_google.classes[f"{identity.issuer_id}.{TEMPLATE_ID}"]
    assert stored["callbackOptions"] == {"url": CALLBACK_URL}
