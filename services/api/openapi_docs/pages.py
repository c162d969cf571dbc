"""The reference of the public pages, files and redirects a holder opens: they answer HTML,
files or a `302` with a `Location` header, not JSON, so their answers are written out here."""

from typing import Any

from services.api.openapi_docs import examples as ex
from services.api.openapi_docs.common import PAGES, Doc


def _html(description: str, example: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"text/html": {"schema": {"type": "string"}, "example": example}},
    }


def _file(media_type: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {media_type: {"schema": {"type": "string", "format": "binary"}}},
    }


def _redirect(description: str, location: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {
            "Location": {
                "description": "Where the browser goes next.",
                "schema": {"type": "string", "format": "uri"},
                "example": location,
            }
        },
    }


_PAGE = '<!doctype html>\n<html lang="en">...</html>'
_NOT_FOUND = _html(
    "The 404 page: no such pass, or it is reachable only through download links.", _PAGE
)
_EXPIRED = _html("The link has expired: a page that asks the holder for a fresh one.", _PAGE)
_PKPASS = "application/vnd.apple.pkpass"
_PKPASS_ANSWERS = {
    "200": _file(_PKPASS, "The signed `.pkpass` (`Content-Disposition: attachment`)."),
    "304": {"description": "The client has this version (`If-None-Match` / `If-Modified-Since`)."},
}
_GOOGLE = (
    "Redirects (`302`, `Location`) to the pass's Google Wallet save link, recording a "
    '`downloaded` event with `wallet: "google"` (the add intent) on the way. Without a Google '
    "link (live mode with Apple's credentials only), the 404 page."
)
_GOOGLE_302 = _redirect("To the pass's Google Wallet save link.", ex.GOOGLE_SAVE_URL)
_LINK = " through an expiring download link (`/l/{token}`); after `expires_at` it answers 410."


OPERATIONS: dict[tuple[str, str], Doc] = {
    ("get", "/p/{short_id}"): Doc(
        PAGES,
        "A pass's landing page",
        "The pass's permanent `url`: a preview of the pass and the wallet buttons that suit the "
        "visitor's device (a QR code to open it on a phone, on a desktop). Records a "
        "`url_viewed` event.",
        responses={"200": _html("The landing page.", _PAGE), "404": _NOT_FOUND},
    ),
    ("get", "/p/{short_id}/pass.pkpass"): Doc(
        PAGES,
        "Download the .pkpass",
        "The pass's `download_url`: the signed `.pkpass` for Apple Wallet, revalidated by "
        '`ETag` and `Last-Modified`. Records a `downloaded` event (`wallet: "apple"`).',
        responses={**_PKPASS_ANSWERS, "404": _NOT_FOUND},
    ),
    ("get", "/p/{short_id}/google"): Doc(
        PAGES,
        "Save to Google Wallet (redirect)",
        _GOOGLE,
        responses={"302": _GOOGLE_302, "404": _NOT_FOUND},
    ),
    ("get", "/l/{token}"): Doc(
        PAGES,
        "A pass's landing page, through a download link",
        "The landing page" + _LINK,
        responses={"200": _html("The landing page.", _PAGE), "404": _NOT_FOUND, "410": _EXPIRED},
    ),
    ("get", "/l/{token}/pass.pkpass"): Doc(
        PAGES,
        "Download the .pkpass through a download link",
        "The signed `.pkpass`" + _LINK,
        responses={**_PKPASS_ANSWERS, "404": _NOT_FOUND, "410": _EXPIRED},
    ),
    ("get", "/l/{token}/google"): Doc(
        PAGES,
        "Save to Google Wallet through a download link (redirect)",
        _GOOGLE + " The same" + _LINK,
        responses={"302": _GOOGLE_302, "404": _NOT_FOUND, "410": _EXPIRED},
    ),
    ("get", "/b/{bundle_id}"): Doc(
        PAGES,
        "A pass bundle's landing page",
        "Every pass of the bundle with its own wallet buttons, and one button that adds them "
        "all to Apple Wallet. Records a `url_viewed` event per pass shown.",
        responses={"200": _html("The bundle's page.", _PAGE), "404": _NOT_FOUND},
    ),
    ("get", "/b/{bundle_id}.pkpasses"): Doc(
        PAGES,
        "Download a bundle's passes",
        "The bundle's passes that are not voided, in one `.pkpasses` file that Apple Wallet "
        "adds at once (iOS 15 and later).",
        responses={
            "200": _file("application/vnd.apple.pkpasses", "The `.pkpasses` file."),
            "404": _NOT_FOUND,
        },
    ),
    ("get", "/scan"): Doc(
        PAGES,
        "The staff scanner page",
        "An installable web app that scans passes with the phone's camera and posts them to "
        "`POST /v1/scans` with a scanner key (docs/redemption.md).",
        responses={"200": _html("The scanner page.", _PAGE)},
    ),
    ("get", "/t/{template_id}/logo.png"): Doc(
        PAGES,
        "A template's logo",
        "The template's logo at its sharpest scale, for Google Wallet, which fetches images by "
        "URL. 404 for an archived template or one without a logo.",
        responses={"200": _file("image/png", "The logo.")},
    ),
    ("get", "/t/{template_id}/google-logo.png"): Doc(
        PAGES,
        "A template's Google logo",
        "The template's square Google Wallet logo (`design.google_logo`).",
        responses={"200": _file("image/png", "The logo.")},
    ),
    ("get", "/assets/logo.png"): Doc(
        PAGES,
        "The placeholder logo",
        "The logo Google Wallet gets for a loyalty class whose template has none.",
        responses={"200": _file("image/png", "The logo.")},
    ),
}
