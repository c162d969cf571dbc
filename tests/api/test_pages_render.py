"""services/api/pages/render.py, qr.py and headers.py: the HTML, the QR code, the headers."""

import re

import segno

from services.api.pages.brand import brand_css, build_brand
from services.api.pages.headers import page_headers, style_hash
from services.api.pages.qr import qr_svg
from services.api.pages.render import (
    render_expired,
    render_landing,
    render_not_found,
    stylesheet,
    stylesheet_url,
)
from services.api.pages.view import PassView, build_view, pass_css
from tests.support.records import DESIGN, pass_record, template_record

PAGE = "https://wallet.example/p/AbCdEfGh12345678"


def _view(**pass_fields: object) -> PassView:
    return build_view(pass_record(**pass_fields), template_record())


def _buttons(html: str) -> set[str]:
    return set(re.findall(r'data-wallet="(\w+)"', html))


def test_each_platform_gets_its_buttons() -> None:
    view = _view()
    ios = render_landing(view, platform="ios", page_url=PAGE, qr=None)
    android = render_landing(view, platform="android", page_url=PAGE, qr=None)
    desktop = render_landing(view, platform="desktop", page_url=PAGE, qr=qr_svg(PAGE))
    assert _buttons(ios) == {"apple"}
    assert f'href="{PAGE}/pass.pkpass"' in ios
    assert "Add to Apple Wallet" in ios
    assert _buttons(android) == {"google"}
    assert f'href="{PAGE}/google"' in android
    assert "Save to Google Wallet" in android
    assert _buttons(desktop) == {"apple", "google"}
    assert f'data-qr-content="{PAGE}"' in desktop
    assert "<svg" in desktop
    assert "data-qr-content" not in ios


def test_android_falls_back_to_the_pkpass_without_a_google_link() -> None:
    html = render_landing(_view(google_save_url=None), platform="android", page_url=PAGE, qr=None)
    assert _buttons(html) == {"apple"}


def test_a_voided_pass_says_so_and_offers_nothing() -> None:
    html = render_landing(_view(voided=True), platform="desktop", page_url=PAGE, qr=None)
    assert "This pass has been voided" in html
    assert _buttons(html) == set()
    assert "/pass.pkpass" not in html


def test_a_used_up_pass_says_so_and_offers_nothing_until_its_limit_is_raised() -> None:
    used = _view(used_up=True, redemption_count=1, redemption_limit=1)
    html = render_landing(used, platform="desktop", page_url=PAGE, qr=None)
    assert "This pass has been used" in html
    assert ">Used</p>" in html
    assert _buttons(html) == set()
    assert "/pass.pkpass" not in html

    # A raised limit admits it again at the door: it is offered again.
    raised = _view(used_up=True, redemption_count=1, redemption_limit=3)
    html = render_landing(raised, platform="desktop", page_url=PAGE, qr=None)
    assert "This pass has been used" not in html
    assert _buttons(html) == {"apple", "google"}


def test_holder_data_is_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    template = template_record(design={**DESIGN, "organization_name": "<b>Acme</b>"})
    record = pass_record(holder_name=hostile, field_values={"seat": "<img src=x onerror=y>"})
    html = render_landing(build_view(record, template), platform="ios", page_url=PAGE, qr=None)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "<b>Acme</b>" not in html
    assert "&lt;b&gt;Acme&lt;/b&gt;" in html


def test_page_basics_for_accessibility() -> None:
    html = render_landing(_view(), platform="desktop", page_url=PAGE, qr=qr_svg(PAGE))
    assert '<html lang="en">' in html
    assert "<title>Concert ticket · Acme Live</title>" in html
    assert html.count("<h1>") == 1
    assert 'name="viewport"' in html
    assert 'role="img" aria-label=' in html
    assert 'id="preview-heading"' in html


def test_the_pass_preview_is_marked_with_the_language_it_is_written_in() -> None:
    """The page's own words are English; a German pass's labels are read in German."""
    template = template_record(design={**DESIGN, "source_language": "de"})
    view = build_view(pass_record(), template)
    html = render_landing(view, platform="desktop", page_url=PAGE, qr=None)
    assert '<html lang="en">' in html
    assert re.search(r'<div class="pass[^"]*" lang="de"', html)


def test_the_inline_style_is_exactly_what_the_csp_hash_names() -> None:
    view = _view()
    html = render_landing(view, platform="ios", page_url=PAGE, qr=None)
    inline = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
    assert inline == [pass_css(view)]
    csp = page_headers(pass_css(view))["Content-Security-Policy"]
    assert f"style-src 'self' {style_hash(inline[0])};" in csp


def test_headers_are_strict() -> None:
    headers = page_headers()
    assert headers["Content-Security-Policy"] == (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    )
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"


def test_no_external_resources() -> None:
    html = render_landing(_view(), platform="desktop", page_url=PAGE, qr=qr_svg(PAGE))
    # Every src and stylesheet href is same-origin (a path) or data:.
    for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert ref.startswith(("/", "data:", PAGE)), ref
    assert "@import" not in stylesheet().decode()
    assert "url(" not in stylesheet().decode()


def test_error_pages_show_no_pass_data() -> None:
    missing, expired = render_not_found(), render_expired()
    assert "We can't find this pass" in missing
    assert "This link has expired" in expired
    assert "fresh link" in expired
    for html in (missing, expired):
        assert "<style>" not in html
        assert stylesheet_url() in html
        assert 'lang="en"' in html


def test_stylesheet_url_is_versioned_and_prefixed() -> None:
    assert re.fullmatch(r"/static/pages\.css\?v=[0-9a-f]{12}", stylesheet_url())
    assert stylesheet_url("/wallet").startswith("/wallet/static/pages.css?v=")


def test_qr_svg_is_segnos_code_for_the_url() -> None:
    svg = qr_svg(PAGE)
    assert svg.startswith('<svg role="img"')
    # The same path data segno makes for the URL: the code encodes exactly it.
    expected = segno.make(PAGE, error="m", micro=False).svg_inline(scale=1, border=4)
    path = re.search(r'<path stroke="#000" d="([^"]+)"', svg)
    assert path is not None
    assert path.group(1) in expected


def test_a_test_pass_wears_a_test_badge_and_a_live_one_does_not() -> None:
    test_html = render_landing(_view(), platform="ios", page_url=PAGE, qr=None)
    assert test_html.count("data-test-badge") == 1
    assert "Test pass: issued in test mode" in test_html
    live = build_view(pass_record(mode="live"), template_record(mode="live"))
    live_html = render_landing(live, platform="ios", page_url=PAGE, qr=None)
    assert "data-test-badge" not in live_html
    assert "test mode" not in live_html


def test_every_front_slot_and_the_barcode_are_on_the_page() -> None:
    design = {**DESIGN, "barcode": {"format": "qr", "alt_text": "Ticket 0042"}}
    view = build_view(
        pass_record(field_values={"seat": "C3", "gate": "4"}, barcode_message="serial-1"),
        template_record(design=design),
    )
    html = render_landing(view, platform="ios", page_url=PAGE, qr=None)
    for slot in ("header", "primary", "secondary", "auxiliary"):
        assert f'class="pass-row pass-{slot}"' in html
    assert 'data-field="row"' in html
    assert '<figure class="pass-barcode" data-barcode-format="qr">' in html
    assert 'aria-label="QR code of this pass"' in html
    assert "<figcaption>Ticket 0042</figcaption>" in html


def test_a_barcode_without_a_writer_shows_its_message_as_text() -> None:
    design = {**DESIGN, "barcode": {"format": "code128"}}
    view = build_view(pass_record(barcode_message="チケット"), template_record(design=design))
    html = render_landing(view, platform="ios", page_url=PAGE, qr=None)
    assert '<p class="pass-barcode-text">チケット</p>' in html
    assert "Your wallet shows this as a Code 128." in html


def test_the_handoff_qr_is_labelled_as_a_way_to_the_phone_not_the_ticket() -> None:
    html = render_landing(_view(), platform="desktop", page_url=PAGE, qr=qr_svg(PAGE))
    assert (
        '<p class="handoff-title" id="handoff-title">Scan with your phone to add the pass</p>'
        in (html)
    )
    assert "It is not your ticket" in html
    assert "(not the ticket)" in qr_svg(PAGE)


def test_error_pages_carry_the_templates_branding_when_given() -> None:
    brand = build_brand(template_record(), path_prefix="/wallet")
    for html in (render_not_found("/wallet", brand), render_expired("/wallet", brand)):
        assert '<p class="brand-name">Acme Live</p>' in html
        inline = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
        assert inline == [brand_css(brand)] == [":root{--brand-bg:#12233A;--brand-fg:#FFFFFF}"]
        # No pass data: neither holder nor field values.
        assert "Ada" not in html
        assert "C3" not in html
