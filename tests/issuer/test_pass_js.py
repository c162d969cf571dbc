"""Acceptance: @walletpass/pass-js (npm), a second independent implementation, reads our passes.

pass-js reads a .pkpass as a wallet does: pass.json (its date setters keep only W3C dates as
written), the images and every `<lang>.lproj/pass.strings` in UTF-16. Checked here: a localized
pass carries its source language, so an iPhone matching none of the translations shows the
design's own text (docs/templates.md, localizations), and dates are W3C, including those stored
with an offset in seconds before such offsets were refused; passkit-generator's strict schema
(tests/node/load_pass.mjs) checks the same pass. Both npm packages are installed on demand
(tests/node/harness.py); the module skips only when `node` or `npm` is not installed.
"""

import datetime
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from services.issuer.bundle import zip_files
from services.issuer.content import PassContent
from services.issuer.passjson import render_pass_json
from services.issuer.pkpass import build_pkpass
from shared.apple_identity import SigningIdentity
from shared.design import Design
from tests.issuer.pkpass_samples import (
    WEB_SERVICE_URL,
    all_scales,
    content,
    minimal_design,
    rich_design,
)
from tests.node import harness

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "pass.schema.json"
# Apple's documented example: translations to French and Brazilian Portuguese, nothing else.
TRANSLATIONS = {
    "fr": {"Seat": "Place", "Test pass": "Passe de test"},
    "pt-BR": {"Seat": "Assento", "Test pass": "Passe de teste", "Tessera": "Tessera"},
}
# Local Mean Time of Colombo as a time zone database gives it for old dates: the kind of offset
# Python reads and writes, and a W3C date cannot.
SECONDS_OFFSET = datetime.timezone(datetime.timedelta(hours=5, minutes=30, seconds=15))


@pytest.fixture(scope="session")
def node_packages() -> None:
    reason = harness.missing_tools()
    if reason is not None:
        pytest.skip(f"pass-js check needs Node: {reason}")
    harness.ensure_installed()


def _pass_js(pkpass: bytes, signing_dir: Path, folder: Path) -> dict[str, Any]:
    path = folder / "pass.pkpass"
    path.write_bytes(pkpass)
    certificates = ["--signer-cert", str(signing_dir / "signer.pem")]
    certificates += ["--signer-key", str(signing_dir / "signer-key.pem")]
    return harness.run_script("load_pass_js.mjs", str(path), *certificates)


def _passkit_generator(pkpass: bytes, signing_dir: Path, folder: Path) -> dict[str, Any]:
    model = harness.write_model(pkpass, folder)
    return harness.run_script("load_pass.mjs", str(model), *harness.signing_args(signing_dir))


def _translated(**extra: Any) -> Design:
    # pass-js wants a logo, which Apple does not require.
    return Design.model_validate(
        {
            **minimal_design("generic"),
            "images": {"logo": all_scales("logo")},
            "localizations": TRANSLATIONS,
            **extra,
        }
    )


def _updatable(design: Design, **overrides: Any) -> PassContent:
    # pass-js refuses an authenticationToken without a webServiceURL: every pass on a
    # configured Tessera has one.
    return content(design, web_service_url=WEB_SERVICE_URL, **overrides)


@pytest.mark.usefixtures("node_packages")
def test_pass_js_reads_the_source_language_and_the_translations(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    design = _translated()

    report = _pass_js(build_pkpass(_updatable(design), identity), signing_dir, tmp_path)

    assert (report["errors"], report["warnings"]) == ([], [])
    assert report["bytes"] > 0  # pass-js built and signed a pass from ours
    assert report["languages"] == {
        # An English iPhone finds its language and sees the design's own text.
        "en": {"Seat": "Seat", "Test pass": "Test pass", "Tessera": "Tessera"},
        **TRANSLATIONS,
    }


@pytest.mark.usefixtures("node_packages")
def test_pass_js_reads_a_source_language_other_than_english(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    design = _translated(source_language="de")

    report = _pass_js(build_pkpass(_updatable(design), identity), signing_dir, tmp_path)

    assert report["errors"] == []
    assert sorted(report["languages"]) == ["de", "fr", "pt-BR"]
    assert report["languages"]["de"]["Seat"] == "Seat"


def _dated_content() -> PassContent:
    """A pass whose dates came in with an offset in seconds (stored before that was refused):
    metadata dates, a date field's value, plus relevance windows of the design."""
    design = Design.model_validate(
        {
            **rich_design("generic"),
            "relevant_dates": [
                {"start_date": "2031-06-01T18:00:00+02:00", "end_date": "2031-06-01T23:00:00+02:00"}
            ],
        }
    )
    return _updatable(
        design,
        field_values={"seat": "12A", "starts": "2031-06-01T20:00:00+05:30:15"},
        expiration_date=datetime.datetime(2031, 12, 31, 23, 59, tzinfo=SECONDS_OFFSET),
        relevant_date=datetime.datetime(2031, 6, 1, 19, 30, tzinfo=SECONDS_OFFSET),
    )


@pytest.mark.usefixtures("node_packages")
def test_both_checkers_accept_a_pass_whose_input_had_a_seconds_offset(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    pass_content = _dated_content()
    pkpass = build_pkpass(pass_content, identity)

    pass_js = _pass_js(pkpass, signing_dir, tmp_path)
    generator = _passkit_generator(pkpass, signing_dir, tmp_path)

    assert (pass_js["errors"], pass_js["warnings"]) == ([], [])
    # pass-js keeps only a valid W3C date string as it is; it re-parses anything else.
    assert pass_js["dates"] == {
        "expirationDate": {"value": "2031-12-31T23:59:00+05:30", "w3c": True},
        "relevantDate": {"value": "2031-06-01T19:30:00+05:30", "w3c": True},
    }
    assert pass_js["dateFields"] == {"starts": {"instant": "2031-06-01T14:30:00.000Z"}}
    assert (generator["errors"], generator["warnings"]) == ([], [])
    assert generator["props"]["relevantDates"] == [
        {"date": "2031-06-01T14:00:00.000Z", "relevantDate": "2031-06-01T14:00:00.000Z"}
    ]
    schema = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    assert list(schema.iter_errors(render_pass_json(pass_content, identity))) == []


@pytest.mark.usefixtures("node_packages")
def test_passkit_generator_reads_relevance_windows(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    design = Design.model_validate(
        {
            **minimal_design("eventTicket"),
            "relevant_dates": [
                {
                    "start_date": "2031-06-01T18:00:00+02:00",
                    "end_date": "2031-06-01T23:00:00+02:00",
                },
                {"start_date": "2031-06-02T18:00:00Z", "end_date": "2031-06-02T21:00:00Z"},
            ],
        }
    )
    pkpass = build_pkpass(_updatable(design, apple_style="eventTicket"), identity)

    generator = _passkit_generator(pkpass, signing_dir, tmp_path)

    assert (generator["errors"], generator["warnings"]) == ([], [])
    assert generator["props"]["relevantDate"] == "2031-06-01T16:00:00.000Z"
    assert generator["props"]["relevantDates"] == [
        {"startDate": "2031-06-01T16:00:00.000Z", "endDate": "2031-06-01T21:00:00.000Z"},
        {"startDate": "2031-06-02T18:00:00.000Z", "endDate": "2031-06-02T21:00:00.000Z"},
    ]


@pytest.mark.usefixtures("node_packages")
def test_the_pass_js_check_is_not_vacuous(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    # What Tessera wrote before: the offset with its seconds. pass-js refuses the pass.
    pkpass = build_pkpass(_dated_content(), identity)
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    pass_json = json.loads(files["pass.json"])
    pass_json["relevantDate"] = "2031-06-01T19:30:00+05:30:15"
    files["pass.json"] = json.dumps(pass_json).encode()

    report = _pass_js(zip_files(files.items()), signing_dir, tmp_path)

    assert report["errors"] == [
        "TypeError: Value for relevantDate must be a valid Date, "
        "received 2031-06-01T19:30:00+05:30:15"
    ]
