"""Acceptance: passkit-generator (npm), an independent implementation, loads our passes cleanly.

For every style and for the rich passes (images at all scales, locales, every barcode format)
the pass directory is loaded as a passkit-generator model, built and signed; not a single
console warning or error and no thrown error is allowed. The npm package is installed on demand
(tests/node/harness.py); the module skips only when `node` or `npm` is not installed.
"""

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.issuer.content import APPLE_STYLES
from services.issuer.localization import escape
from services.issuer.pkpass import build_pkpass
from shared.apple_identity import SigningIdentity
from tests.issuer.pkpass_samples import LOCALIZATIONS, RICH_VARIANTS, sample
from tests.node import harness

SAMPLES = [*((style, "minimal") for style in APPLE_STYLES), *RICH_VARIANTS]


@pytest.fixture(scope="session")
def passkit_generator() -> None:
    reason = harness.missing_tools()
    if reason is not None:
        pytest.skip(f"passkit-generator check needs Node: {reason}")
    harness.ensure_installed()


def _load(pkpass: bytes, signing_dir: Path, parent: Path) -> dict[str, Any]:
    model = harness.write_model(pkpass, parent)
    return harness.run_script("load_pass.mjs", str(model), *harness.signing_args(signing_dir))


@pytest.mark.usefixtures("passkit_generator")
@pytest.mark.parametrize(("style", "variant"), SAMPLES)
def test_passkit_generator_loads_our_pass_without_a_warning(
    style: str, variant: str, identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    pkpass = build_pkpass(sample(style, variant), identity)
    ours = set(zipfile.ZipFile(io.BytesIO(pkpass)).namelist())

    report = _load(pkpass, signing_dir, tmp_path)

    assert report["errors"] == []
    assert report["warnings"] == []
    # Everything we ship was kept, and the pass it built still has our style and barcodes.
    assert set(report["files"]) == ours
    props = report["props"]
    assert style in props
    assert props["serialNumber"] == "SER-1"
    assert len(props["barcodes"]) == (1 if variant == "minimal" else 4)
    if style == "boardingPass":
        assert props[style]["transitType"].startswith("PKTransitType")
    if variant != "minimal":
        expected = {
            language: {escape(key): escape(value) for key, value in strings.items()}
            for language, strings in LOCALIZATIONS.items()
        }
        assert report["languages"] == expected
        assert sorted(report["transcoded"]) == sorted(
            f"{language}.lproj/pass.strings" for language in LOCALIZATIONS
        )


def _number_style_on_text(model: Path) -> None:
    pass_json = (model / "pass.json").read_text()
    broken = pass_json.replace(
        '"label":"Seat","value":"12A"',
        '"label":"Seat","value":"12A","numberStyle":"PKNumberStyleDecimal"',
    )
    assert broken != pass_json
    (model / "pass.json").write_text(broken)


def _no_icon(model: Path) -> None:
    for icon in model.glob("icon*.png"):
        icon.unlink()


@pytest.mark.usefixtures("passkit_generator")
@pytest.mark.parametrize(
    ("damage", "complaint"),
    [(_number_style_on_text, "numberStyle"), (_no_icon, "icon file is missing")],
    ids=["number-style-on-text", "no-icon"],
)
def test_the_check_is_not_vacuous(
    damage: Callable[[Path], None],
    complaint: str,
    identity: SigningIdentity,
    signing_dir: Path,
    tmp_path: Path,
) -> None:
    model = harness.write_model(build_pkpass(sample("generic", "minimal"), identity), tmp_path)
    damage(model)

    report = harness.run_script("load_pass.mjs", str(model), *harness.signing_args(signing_dir))

    assert complaint in "\n".join(report["warnings"])
