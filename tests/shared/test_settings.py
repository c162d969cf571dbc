import pytest
from pydantic import ValidationError

from services.api.config import ApiSettings
from services.events.config import EventsSettings


def test_common_settings_read_the_shared_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_NATS_URL", "nats://nats:4222")
    monkeypatch.setenv("TESSERA_EVENTS_PORT", "9001")
    settings = EventsSettings()
    assert settings.nats_url == "nats://nats:4222"
    assert settings.port == 9001


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "")
    assert ApiSettings().admin_token is None


def test_production_refuses_placeholder_secrets_and_plain_http(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TESSERA_ENVIRONMENT", "production")
    monkeypatch.setenv("TESSERA_SITE_URL", "https://passes.example.com")
    monkeypatch.setenv("TESSERA_WALLET_URL", "https://wallet.example.com")
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "changeme")
    with pytest.raises(ValidationError, match="placeholder"):
        ApiSettings()
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "x" * 40)
    assert ApiSettings().admin_token == "x" * 40
    monkeypatch.setenv("TESSERA_WALLET_URL", "http://wallet.example.com")
    with pytest.raises(ValidationError, match="https"):
        ApiSettings()
