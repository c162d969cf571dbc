"""Tests for WalletArtifacts: which logo Google Wallet is given (issue 15)."""

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.issuer.artifacts import WalletArtifacts
from services.issuer.validation import validate_design
from shared.design import Design
from shared.design_images import image_version
from shared.models import PassRecord, TemplateRecord
from tests.issuer.event_samples import poster_design
from tests.issuer.pkpass_samples import all_scales, b64, minimal_design, png
from tests.support.issuer import SITE, dev_artifacts

NOW = datetime(2031, 1, 1, tzinfo=UTC)


def _template(
    design: dict[str, Any], kind: str = "generic", style: str = "generic"
) -> TemplateRecord:
    checked = validate_design(design, style, kind).model_dump(mode="json")
    return TemplateRecord.model_validate(
        {
            "_id": "template_logos",
            "account_id": "acct_logos",
            "mode": "test",
            "name": "Logos",
            "type": kind,
            "apple_style": style,
            "design": checked,
            "created_at": NOW,
            "updated_at": NOW,
        }
    )


def _logo_url(artifacts: WalletArtifacts, template: TemplateRecord) -> str | None:
    return artifacts.logo_url(template, Design.from_stored(template.design))


def test_the_square_google_logo_is_preferred_to_the_apple_logo(tmp_path: Path) -> None:
    artifacts = dev_artifacts(tmp_path)
    logo = {"images": {"logo": all_scales("logo")}}
    google_logo = {"google_logo": b64(png(660, 660))}

    both = _template({**minimal_design("generic"), **logo, **google_logo})
    apple_only = _template({**minimal_design("generic"), **logo})
    google_only = _template({**minimal_design("generic"), **google_logo})
    neither = _template(minimal_design("generic"))

    stored = Design.from_stored(both.design).google_logo  # as saved (cleaned)
    assert stored is not None
    square = f"{SITE}/t/template_logos/google-logo.png?v={image_version(stored)}"
    assert _logo_url(artifacts, both) == square
    assert _logo_url(artifacts, google_only) == square
    assert str(_logo_url(artifacts, apple_only)).startswith(f"{SITE}/t/template_logos/logo.png?v=")
    assert _logo_url(artifacts, neither) is None


def test_a_new_logo_has_a_new_url(tmp_path: Path) -> None:
    """Google keeps its own copy of an image it fetched by URL: the same URL for a new logo
    left every saved pass on the old one (and a generic object, which holds the logo, was
    not even sent again, being unchanged)."""
    artifacts = dev_artifacts(tmp_path)
    first = _template({**minimal_design("generic"), "images": {"logo": b64(png(100, 30))}})
    # A design change: the next design version (of a template of its own: versions are
    # kept per template and design version in this process).
    second = _template({**minimal_design("generic"), "images": {"logo": b64(png(100, 31))}})
    again = _template({**minimal_design("generic"), "images": {"logo": b64(png(100, 30))}})
    for version, template in enumerate((first, second, again), start=1):
        template.id, template.design_version = "template_new_logo", version
    assert _logo_url(artifacts, first) != _logo_url(artifacts, second)
    assert _logo_url(artifacts, first) == _logo_url(artifacts, again)


def test_the_save_link_carries_the_google_logo_and_the_event(tmp_path: Path) -> None:
    artifacts = dev_artifacts(tmp_path)
    template = _template(poster_design(), "event", "eventTicket")
    record = PassRecord.model_validate(
        {
            "_id": "pass_logos",
            "account_id": "acct_logos",
            "mode": "test",
            "short_id": "LOGOS1",
            "template_id": template.id,
            "serial_number": "SER-LOGOS",
            "field_values": {"seat": "12"},
            "authentication_token": "a-very-long-authentication-token",
            "created_at": NOW,
            "updated_at": NOW,
        }
    )

    artifacts.attach_google(record)

    # The development identity's link is fat: the class travels inside the JWT.
    assert record.google_save_url == ""  # has a link, signed when asked
    link = artifacts.save_link(template, record)
    assert link is not None
    claims = link.rsplit("/", 1)[1].split(".")[1]
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["payload"]
    (event_class,) = payload["eventTicketClasses"]
    (event_object,) = payload["eventTicketObjects"]
    assert event_class["logo"]["sourceUri"]["uri"].startswith(
        f"{SITE}/t/{template.id}/google-logo.png?v="
    )
    assert event_class["dateTime"]["start"] == "2031-06-01T20:00:00+02:00"
    assert event_class["venue"]["name"]["defaultValue"]["value"] == "Arena"
    assert event_object["seatInfo"]["seat"]["defaultValue"]["value"] == "12"
