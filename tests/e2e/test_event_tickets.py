"""Issue 15 through the whole stack: a template with the design's `event` block issues iOS 18
poster event tickets that openssl and passkit-generator accept, and its square Google logo is
served at /t/{id}/google-logo.png; a misplaced block or a logo Google cannot use is a 400."""

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.issuer.event_samples import APPLE_EXTRA_KEYS, EVENT, poster_design
from tests.issuer.pkpass_samples import b64, chunk_types, pixels, png, png_with
from tests.node import harness
from tests.support.api import assert_error, create_pass, create_template, ok
from tests.support.pkpass_check import verified_pass_json
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
TEMPLATE: dict[str, Any] = {
    "name": "Spring Tour",
    "type": "event",
    "apple_style": "eventTicket",
    "design": poster_design(),
}


def test_a_poster_ticket_is_issued_and_validates(stack: Stack, tmp_path: Path) -> None:
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, TEMPLATE)
        made = create_pass(client, template["id"], field_values={"seat": "12", "row": "F"})
        download = client.get(made["download_url"])
    assert download.status_code == 200, download.text

    pass_json = verified_pass_json(download.content, stack.signing_dir / "root-ca.pem", tmp_path)
    assert template["design"]["event"]["poster"] is True
    assert pass_json["preferredStyleSchemes"] == ["posterEventTicket", "eventTicket"]
    assert pass_json["semantics"]["eventName"] == "Spring Tour"
    assert pass_json["semantics"]["seats"] == [
        {"seatSection": "B", "seatRow": "F", "seatNumber": "12"}
    ]
    assert {key: pass_json[key] for key in APPLE_EXTRA_KEYS} == APPLE_EXTRA_KEYS

    if harness.missing_tools() is None:
        harness.ensure_installed()
        model = harness.write_model(download.content, tmp_path, "downloaded")
        signing = harness.signing_args(stack.signing_dir)
        report = harness.run_script("load_pass.mjs", str(model), *signing)
        assert report["errors"] == []
        assert report["warnings"] == []
        assert report["props"]["semantics"] == pass_json["semantics"]
        assert report["props"]["preferredStyleSchemes"] == pass_json["preferredStyleSchemes"]


def test_the_google_logo_is_served_cleaned_like_the_logo(stack: Stack) -> None:
    texty = png_with(png(660, 660), (b"tEXt", b"Comment\0<html><script>x</script></html>"))
    body = {**TEMPLATE, "design": poster_design(google_logo=b64(texty))}
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, body)
        without = create_template(client, TEMPLATE, design=poster_design(google_logo=None))
        url = f"/t/{template['id']}/google-logo.png"
        served = client.get(url)
        missing = client.get(f"/t/{without['id']}/google-logo.png")
        unknown = client.get("/t/template_nope/google-logo.png")
        assert client.delete(f"/v1/templates/{template['id']}").status_code == 200
        archived = client.get(url)

    assert served.status_code == 200
    assert served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "default-src 'none'"
    assert served.headers["cache-control"] == "public, max-age=3600"
    assert chunk_types(served.content) == [b"IHDR", b"IDAT", b"IEND"]
    assert pixels(served.content) == pixels(png(660, 660))
    for response in (missing, unknown):
        assert_error(response, 404, "not_found_error")
    assert (archived.status_code, archived.content) == (200, served.content)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"apple_style": "generic", "design": poster_design(images={})}, "design.event"),
        ({"type": "membership"}, "design.event"),
        ({"design": poster_design(google_logo=b64(png(512, 512)))}, "design.google_logo"),
        ({"design": poster_design(google_logo=b64(png(700, 660)))}, "design.google_logo"),
        ({"design": poster_design(barcode=None)}, "design.event.poster"),
        (
            {"design": poster_design(event={**EVENT, "venue": {**EVENT["venue"], "room": None}})},
            "design.event.venue.room",
        ),
        (
            {"design": poster_design(event={**EVENT, "starts_at": "2031-06-01T20:00:00"})},
            "design.event.starts_at",
        ),
        (
            {"design": poster_design(event={**EVENT, "links": {"sell": "javascript:alert(1)"}})},
            "design.event.links.sell",
        ),
        ({"design": poster_design(event={**EVENT, "poster": False})}, "design.images.artwork"),
    ],
)
def test_what_cannot_work_is_refused_with_its_param(
    stack: Stack, body: dict[str, Any], param: str
) -> None:
    sent = {**TEMPLATE, **body}
    with stack.client(headers=stack.new_account().headers()) as client:
        assert_error(client.post("/v1/templates", json=sent), 400, "invalid_request_error", param)
        # A PATCH of the design is checked against the template's own type and style.
        if set(body) == {"design"}:
            template = create_template(client, TEMPLATE)
            patched = client.patch(
                f"/v1/templates/{template['id']}", json={"design": body["design"]}
            )
            assert_error(patched, 400, "invalid_request_error", param)
            assert ok(client.get(f"/v1/templates/{template['id']}"))["design_version"] == 1
    assert "Traceback" not in stack.log_text("api") + stack.log_text("issuer")


def test_a_classic_ticket_gets_the_semantics_but_not_the_poster(stack: Stack) -> None:
    event = {"name": "Spring Tour", "starts_at": "2031-06-01T20:00+02:00"}
    design = poster_design(event=event, images={}, google_logo=None)
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, TEMPLATE, design=design)
        made = create_pass(client, template["id"], field_values={"seat": "3"})
        pkpass = httpx2.get(made["download_url"], timeout=30).content

    pass_json = json.loads(zipfile.ZipFile(io.BytesIO(pkpass)).read("pass.json"))
    assert template["design"]["event"]["poster"] is False
    assert template["design"]["google_logo"] is None
    assert "preferredStyleSchemes" not in pass_json
    assert pass_json["semantics"] == {
        "eventName": "Spring Tour",
        "eventStartDate": "2031-06-01T20:00:00+02:00",
    }
