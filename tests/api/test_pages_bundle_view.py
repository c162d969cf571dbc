"""services/api/pages/bundle_view.py and render.render_bundle: a bundle's landing page."""

import re

from services.api.pages.bundle_view import BundleView, build_bundle_view, bundle_css
from services.api.pages.headers import page_headers, style_hash
from services.api.pages.qr import qr_svg
from services.api.pages.render import render_bundle
from services.api.pages.view import build_view
from shared.models import PassRecord, TemplateRecord
from tests.support.records import DESIGN, pass_record, template_record

SITE = "https://wallet.example"
PAGE = f"{SITE}/b/pbdl_0000000000000000000001"


def _passes(count: int, **overrides: object) -> list[tuple[PassRecord, TemplateRecord]]:
    green = template_record(
        _id="tmpl_green", design=DESIGN | {"colors": {**DESIGN["colors"], "background": "#0A5C36"}}
    )
    made = []
    for n in range(count):
        record = pass_record(
            _id=f"pass_{n}", short_id=f"Short{n:011d}", field_values={"seat": f"A{n}"}, **overrides
        )
        made.append((record, green if n % 2 else template_record()))
    return made


def _view(passes: list[tuple[PassRecord, TemplateRecord]]) -> BundleView:
    return build_bundle_view(passes, site_url=SITE, page_url=PAGE)


def _buttons(html: str) -> list[tuple[str, str]]:
    return re.findall(r'data-wallet="(\w+)" href="([^"]+)"', html)


def test_every_pass_is_shown_with_its_own_buttons_and_one_add_all() -> None:
    view = _view(_passes(3))

    html = render_bundle(view, platform="desktop", qr=qr_svg(PAGE))

    assert html.count('class="pass"') == 3
    assert "<h1>Your 3 passes</h1>" in html
    for n in range(3):
        assert f"Pass {n + 1} of 3: Concert ticket" in html
        assert f"<dd>A{n}</dd>" in html
    assert _buttons(html) == [
        ("apple", f"{PAGE}.pkpasses"),
        *[
            button
            for n in range(3)
            for button in [
                ("apple", f"{SITE}/p/Short{n:011d}/pass.pkpass"),
                ("google", f"{SITE}/p/Short{n:011d}/google"),
            ]
        ],
    ]
    assert "Add all to Apple Wallet" in html
    assert f'data-qr-content="{PAGE}"' in html


def test_an_iphone_gets_apple_buttons_and_an_android_phone_google_ones() -> None:
    view = _view(_passes(2))

    ios = render_bundle(view, platform="ios", qr=None)
    android = render_bundle(view, platform="android", qr=None)

    assert {wallet for wallet, _ in _buttons(ios)} == {"apple"}
    assert len(_buttons(ios)) == 3  # add all, then each pass
    # Google has no bundle: each pass is saved on its own.
    assert {wallet for wallet, _ in _buttons(android)} == {"google"}
    assert len(_buttons(android)) == 2
    assert "data-qr-content" not in ios + android
    # No "add all" section at all, not a heading with nothing under it.
    assert "Add these passes" in ios
    assert "Add these passes" not in android


def test_each_pass_keeps_its_template_colors_under_the_pages_csp() -> None:
    view = _view(_passes(2))

    css = bundle_css(view)

    assert css == (
        ".ticket-1{--pass-bg:#12233A;--pass-fg:#FFFFFF;--pass-label:#9FC3FF}"
        ".ticket-2{--pass-bg:#0A5C36;--pass-fg:#FFFFFF;--pass-label:#9FC3FF}"
    )
    html = render_bundle(view, platform="ios", qr=None)
    assert f"<style>{css}</style>" in html
    assert 'class="ticket ticket-1"' in html
    assert 'class="ticket ticket-2"' in html
    assert style_hash(css) in page_headers(css)["Content-Security-Policy"]


def test_a_voided_pass_is_shown_voided_without_buttons() -> None:
    passes = _passes(2)
    passes[1] = (passes[1][0].model_copy(update={"voided": True}), passes[1][1])

    html = render_bundle(_view(passes), platform="ios", qr=None)

    assert "pass-voided" in html
    assert "This pass has been voided" in html
    assert "Short00000000001" not in html
    assert "Add all to Apple Wallet" in html


def test_a_bundle_of_voided_passes_offers_nothing() -> None:
    view = _view(_passes(2, voided=True))

    html = render_bundle(view, platform="desktop", qr=None)

    assert not view.addable
    assert _buttons(html) == []
    assert ".pkpasses" not in html


def test_a_used_up_pass_is_shown_used_without_buttons() -> None:
    passes = _passes(2)
    used = {"used_up": True, "redemption_count": 1, "redemption_limit": 1}
    passes[1] = (passes[1][0].model_copy(update=used), passes[1][1])

    html = render_bundle(_view(passes), platform="ios", qr=None)

    assert "This pass has been used" in html
    assert "Add all to Apple Wallet" in html
    assert not _view(passes[1:]).addable


def test_holder_data_is_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    view = _view(_passes(1, holder_name=hostile))

    html = render_bundle(view, platform="ios", qr=None)

    assert hostile not in html
    assert "&lt;script&gt;" in html
    assert "<h1>Your pass</h1>" in html


def test_each_test_pass_of_a_bundle_wears_the_test_badge() -> None:
    html = render_bundle(_view(_passes(3)), platform="ios", qr=None)
    assert html.count("data-test-badge") == 3
    live = [
        (pass_record(_id=f"pass_{n}", mode="live"), template_record(mode="live")) for n in range(2)
    ]
    assert "data-test-badge" not in render_bundle(_view(live), platform="ios", qr=None)


def test_a_bundle_shows_the_previews_it_is_given() -> None:
    passes = _passes(2)
    given = build_view(*passes[1])
    view = build_bundle_view(passes, site_url=SITE, page_url=PAGE, views=[given, given])
    assert [ticket.view for ticket in view.tickets] == [given, given]
