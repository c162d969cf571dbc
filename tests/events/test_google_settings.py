"""The events service's Google callback settings: issuer id aliases and the root keys file."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from services.events.config import EventsSettings
from services.events.google_events import root_keys_from
from shared.google_ids import DEV_ISSUER_ID
from tests.support.google_signer import GoogleSigner


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TESSERA_EVENTS_GOOGLE_ISSUER_ID", "TESSERA_ISSUER_GOOGLE_ISSUER_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH", raising=False)


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


def test_root_keys_are_off_by_default_and_read_from_the_file(tmp_path: Path) -> None:
    assert root_keys_from(EventsSettings()) is None
    path = GoogleSigner().write_root_keys(tmp_path / "keys.json")
    (key,) = root_keys_from(EventsSettings(google_root_keys_path=path)) or []
    assert key.public_key.curve.name == "secp256r1"


@pytest.mark.parametrize("content", [None, "not json", '{"keys": []}'])
def test_an_unusable_root_keys_file_stops_the_service(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "keys.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match="TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH"):
        root_keys_from(EventsSettings(google_root_keys_path=path))
