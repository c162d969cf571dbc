"""Which identities sign: configured ones (PEM or PKCS#12), else development ones. The Apple
identity's settings are shared with the events service (APNs), under one set of variables."""

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
from pydantic import ValidationError

from services.events.config import EventsSettings
from services.issuer.config import IssuerSettings
from services.issuer.identity import load_identities
from shared.apple_identity import ensure_dev_identity, load_apple_identity


def _settings(tmp_path: Path, **values: object) -> IssuerSettings:
    return IssuerSettings.model_validate({"data_dir": tmp_path / "data", **values})


def test_without_credentials_both_identities_are_for_development(tmp_path: Path) -> None:
    identities = load_identities(_settings(tmp_path))
    assert identities.apple_is_development
    assert identities.google.is_development
    assert not identities.live_ready
    assert not identities.google_live
    assert identities.missing_for_live() == ["Apple Wallet"]
    assert (tmp_path / "data" / "signing" / "root-ca.pem").exists()


def test_pem_and_pkcs12_identities_load(tmp_path: Path) -> None:
    made = ensure_dev_identity(tmp_path / "apple", pass_type_identifier="pass.com.example")
    pem = {
        "apple_certificate_path": tmp_path / "apple" / "signer.pem",
        "apple_private_key_path": tmp_path / "apple" / "signer-key.pem",
        "apple_wwdr_certificate_path": tmp_path / "apple" / "wwdr.pem",
        "pass_type_identifier": "pass.com.example",
    }
    from_pem = load_identities(_settings(tmp_path, **pem))
    assert not from_pem.apple_is_development
    assert from_pem.apple.certificate == made.certificate
    # Apple alone makes live mode: its passes then have no Google link (issue 16).
    assert from_pem.live_ready
    assert from_pem.missing_for_live() == []
    assert not from_pem.google_live

    bundle = pkcs12.serialize_key_and_certificates(
        b"tessera", made.private_key, made.certificate, None, BestAvailableEncryption(b"s3cret")
    )
    (tmp_path / "pass.p12").write_bytes(bundle)
    from_p12 = load_identities(
        _settings(
            tmp_path,
            apple_pkcs12_path=tmp_path / "pass.p12",
            apple_private_key_password="s3cret",
            apple_wwdr_certificate_path=tmp_path / "apple" / "wwdr.pem",
            pass_type_identifier="pass.com.example",
        )
    )
    assert from_p12.apple.certificate == made.certificate


@pytest.mark.parametrize(
    "values",
    [
        {"apple_certificate_path": "a.pem"},
        {"apple_pkcs12_path": "a.p12"},
        {"apple_pkcs12_path": "a.p12", "apple_certificate_path": "a.pem"},
        {"google_service_account_path": "key.json"},
        {"environment": "production"},
    ],
)
def test_incomplete_credentials_are_refused_at_start(
    tmp_path: Path, values: dict[str, str]
) -> None:
    with pytest.raises(ValidationError):
        _settings(tmp_path, **values)


def test_both_services_read_one_identity_from_the_shared_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = ensure_dev_identity(tmp_path / "apple", pass_type_identifier="pass.com.example")
    monkeypatch.setenv("TESSERA_PASS_TYPE_IDENTIFIER", "pass.com.example")
    monkeypatch.setenv("TESSERA_APPLE_CERTIFICATE_PATH", str(tmp_path / "apple" / "signer.pem"))
    monkeypatch.setenv("TESSERA_APPLE_PRIVATE_KEY_PATH", str(tmp_path / "apple" / "signer-key.pem"))
    monkeypatch.setenv("TESSERA_APPLE_WWDR_CERTIFICATE_PATH", str(tmp_path / "apple" / "wwdr.pem"))
    for settings in (IssuerSettings(), EventsSettings()):
        assert settings.apple_configured
        assert load_apple_identity(settings).certificate == made.certificate


def test_production_events_need_the_identity_unless_apns_uses_a_token(tmp_path: Path) -> None:
    production = {
        "environment": "production",
        "site_url": "https://passes.example.com",
        "wallet_url": "https://wallet.example.com",
    }
    with pytest.raises(ValidationError, match="Apple signing identity"):
        EventsSettings.model_validate(production)
    token = {"apns_key_path": tmp_path / "AuthKey.p8", "apns_key_id": "K", "apns_team_id": "T"}
    assert not EventsSettings.model_validate(production | token).apple_configured
