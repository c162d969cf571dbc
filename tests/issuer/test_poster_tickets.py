"""Acceptance (issue 15): an iOS 18 poster event ticket validates with passkit-generator, whose
3.6.1 schemas know the poster keys, with `openssl cms -verify`, and with Apple's pass.json
schema (tests/fixtures/pass.schema.json).

passkit-generator strips keys its schemas do not know without a word, so the check is that every
key we wrote comes back from it unchanged, not only that it stayed silent.
"""

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from services.issuer.pkpass import build_pkpass
from services.issuer.validation import validate_design
from shared.apple_identity import ROOT_CERT_FILE, SigningIdentity
from tests.issuer.event_samples import APPLE_EXTRA_KEYS, poster_content, poster_design
from tests.node import harness
from tests.support.pkpass_check import OPENSSL, verified_pass_json

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "pass.schema.json"


@pytest.fixture(scope="module")
def pkpass(identity: SigningIdentity) -> bytes:
    return build_pkpass(poster_content(), identity)


@pytest.fixture(scope="module")
def passkit_generator() -> None:
    reason = harness.missing_tools()
    if reason is not None:
        pytest.skip(f"passkit-generator check needs Node: {reason}")
    harness.ensure_installed()


def _pass_json(pkpass: bytes) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(zipfile.ZipFile(io.BytesIO(pkpass)).read("pass.json"))
    return document


def test_the_sample_is_a_design_the_api_accepts() -> None:
    design = validate_design(poster_design(), "eventTicket", "event")
    assert design.event is not None
    assert design.event.poster


@pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")
def test_a_poster_ticket_is_signed_as_wallet_checks_it(
    pkpass: bytes, signing_dir: Path, tmp_path: Path
) -> None:
    pass_json = verified_pass_json(pkpass, signing_dir / ROOT_CERT_FILE, tmp_path)

    assert pass_json["preferredStyleSchemes"] == ["posterEventTicket", "eventTicket"]
    names = zipfile.ZipFile(io.BytesIO(pkpass)).namelist()
    assert {"artwork.png", "artwork@2x.png", "icon.png", "logo.png"} <= set(names)
    # The Google logo is Google's: fetched by URL, never shipped to Apple Wallet.
    assert not [name for name in names if "google" in name]


def test_a_poster_ticket_matches_apples_pass_json_schema(pkpass: bytes) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    assert [error.message for error in validator.iter_errors(_pass_json(pkpass))] == []


@pytest.mark.usefixtures("passkit_generator")
def test_passkit_generator_keeps_every_poster_key_without_a_warning(
    pkpass: bytes, signing_dir: Path, tmp_path: Path
) -> None:
    model = harness.write_model(pkpass, tmp_path)
    report = harness.run_script("load_pass.mjs", str(model), *harness.signing_args(signing_dir))

    assert report["errors"] == []
    assert report["warnings"] == []
    ours = _pass_json(pkpass)
    props = report["props"]
    assert props["preferredStyleSchemes"] == ["posterEventTicket", "eventTicket"]
    assert props["semantics"] == ours["semantics"]
    assert {key: props.get(key) for key in APPLE_EXTRA_KEYS} == APPLE_EXTRA_KEYS
    assert {"artwork.png", "artwork@2x.png"} <= set(report["files"])


@pytest.mark.usefixtures("passkit_generator")
def test_the_check_is_not_vacuous(pkpass: bytes, signing_dir: Path, tmp_path: Path) -> None:
    """passkit-generator drops a semantic tag it does not know without a word (the comparison
    above catches that), and refuses pass.json over a style scheme it does not know."""
    reports = []
    for name, key, value in (
        ("tag", "semantics", {**_pass_json(pkpass)["semantics"], "venueAddress": "1 Main St"}),
        ("scheme", "preferredStyleSchemes", ["poster"]),
    ):
        model = harness.write_model(pkpass, tmp_path, name)
        document = json.loads((model / "pass.json").read_text())
        document[key] = value
        (model / "pass.json").write_text(json.dumps(document))
        reports.append(
            harness.run_script("load_pass.mjs", str(model), *harness.signing_args(signing_dir))
        )
    unknown_tag, unknown_scheme = reports

    assert unknown_tag["warnings"] == []
    assert unknown_tag["props"]["semantics"] == _pass_json(pkpass)["semantics"]  # dropped
    assert "preferredStyleSchemes" in "\n".join(unknown_scheme["warnings"])
