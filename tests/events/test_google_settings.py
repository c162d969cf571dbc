"""The events service's Google callback settings: issuer id aliases, the root keys URL and
file."""

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.events.config import EventsSettings
from services.events.google_events import root_keys_from
from services.events.google_root_keys import FetchedRootKeys, StaticRootKeys
from shared.google_ids import DEV_ISSUER_ID
from tests.support.google_signer import GoogleSigner


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TESSERA_EVENTS_GOOGLE_ISSUER_ID", "TESSERA_ISSUER_GOOGLE_ISSUER_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH", raising=False)
    monkeypatch.delenv("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL", raising=False)


def test_the_issuer_id_defaults_to_the_development_one() -> None:
    assert EventsSettings().google_issuer_id == DEV_ISSUER_ID


def test_the_issuers_setting_is_read_and_the_events_one_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TESSERA_ISSUER_GOOGLE_ISSUER_ID", "3388000000011111111")
    assert EventsSettings().google_issuer_id == "3388000000011111111"
    monkeypatch.setenv("TESSERA_EVENTS_GOOGLE_ISSUER_ID", "3388000000022222222")
    assert EventsSettings().google_issuer_id == "3388000000022222222"


def test_an_issuer_id_that_is_not_digits_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_EVENTS_GOOGLE_ISSUER_ID", "issuer-1")
    with pytest.raises(ValidationError):
        EventsSettings()


async def test_root_keys_are_fetched_from_google_unless_a_file_is_given(tmp_path: Path) -> None:
    fetched = root_keys_from(EventsSettings())
    assert isinstance(fetched, FetchedRootKeys)
    assert fetched.url == "https://pay.google.com/gp/m/issuer/keys"
    await fetched.aclose()
    path = GoogleSigner().write_root_keys(tmp_path / "keys.json")
    settings = EventsSettings(google_root_keys_path=path, google_root_keys_url="http://x.test/k")
    static = root_keys_from(settings)
    assert isinstance(static, StaticRootKeys)
    (key,) = await static.keys(datetime.now(UTC))
    assert key.public_key.curve.name == "secp256r1"


def test_the_root_keys_url_must_be_https_in_production(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL", "http://keys.example/keys")
    assert EventsSettings().google_root_keys_url == "http://keys.example/keys"
    production = {
        "TESSERA_ENVIRONMENT": "production",
        "TESSERA_SITE_URL": "https://s.example",
        "TESSERA_WALLET_URL": "https://w.example",
        # APNs token auth: production then needs no Apple certificate in this service.
        "TESSERA_EVENTS_APNS_KEY_PATH": "AuthKey.p8",
        "TESSERA_EVENTS_APNS_KEY_ID": "ABC123DEFG",
        "TESSERA_EVENTS_APNS_TEAM_ID": "ABCDE12345",
    }
    for name, value in production.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match="GOOGLE_ROOT_KEYS_URL must be https"):
        EventsSettings()
    monkeypatch.setenv("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL", "https://keys.example/keys")
    assert EventsSettings().environment == "production"
    monkeypatch.setenv("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL", "file:///etc/keys.json")
    with pytest.raises(ValidationError):
        EventsSettings()


@pytest.mark.parametrize("content", [None, "not json", '{"keys": []}'])
def test_an_unusable_root_keys_file_stops_the_service(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "keys.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match="TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH"):
        root_keys_from(EventsSettings(google_root_keys_path=path))
