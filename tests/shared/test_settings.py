import pytest
from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings

from services.api.config import ApiSettings
from services.events.config import EventsSettings
from services.issuer.config import IssuerSettings
from services.webhooks.config import DEFAULT_RETRY_SCHEDULE_SECONDS, WebhooksSettings


def test_common_settings_read_the_shared_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_NATS_URL", "nats://nats:4222")
    monkeypatch.setenv("TESSERA_EVENTS_PORT", "9001")
    settings = EventsSettings()
    assert settings.nats_url == "nats://nats:4222"
    assert settings.port == 9001


@pytest.mark.parametrize("name", ["api", "events", "issuer", "webhooks"])
@pytest.mark.parametrize("port", ["0", "-1", "65536", "80000"])
def test_a_port_no_socket_can_have_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, name: str, port: str
) -> None:
    """Accepted, it failed later, when the service bound its socket, with a traceback."""
    classes: dict[str, type[BaseSettings]] = {
        "api": ApiSettings,
        "events": EventsSettings,
        "issuer": IssuerSettings,
        "webhooks": WebhooksSettings,
    }
    monkeypatch.setenv("TESSERA_WEBHOOKS_SECRET_KEY", "k" * 44)
    monkeypatch.setenv(f"TESSERA_{name.upper()}_PORT", port)
    with pytest.raises(ValidationError, match="port"):
        classes[name]()
    monkeypatch.setenv(f"TESSERA_{name.upper()}_PORT", "65535")
    assert classes[name]().model_dump()["port"] == 65535


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
    token = ApiSettings().admin_token
    assert token is not None
    assert token.get_secret_value() == "x" * 40
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "x" * 31)
    with pytest.raises(ValidationError, match="at least 32"):
        ApiSettings()
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "x" * 40)
    monkeypatch.setenv("TESSERA_WALLET_URL", "http://wallet.example.com")
    with pytest.raises(ValidationError, match="https"):
        ApiSettings()


def test_production_refuses_a_metrics_token_short_enough_to_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/metrics is on the public ports with no limit on guesses (the admin API counts them):
    a short token could be found at the full request rate."""
    monkeypatch.setenv("TESSERA_ENVIRONMENT", "production")
    monkeypatch.setenv("TESSERA_SITE_URL", "https://passes.example.com")
    monkeypatch.setenv("TESSERA_WALLET_URL", "https://wallet.example.com")
    monkeypatch.setenv("TESSERA_METRICS_TOKEN", "m" * 31)
    with pytest.raises(ValidationError, match="TESSERA_METRICS_TOKEN must be at least 32"):
        ApiSettings()
    monkeypatch.setenv("TESSERA_METRICS_TOKEN", "m" * 32)
    token = ApiSettings().metrics_token
    assert token is not None
    monkeypatch.setenv("TESSERA_ENVIRONMENT", "development")
    monkeypatch.setenv("TESSERA_METRICS_TOKEN", "short")
    assert ApiSettings().metrics_token is not None  # development: any token


def test_secrets_never_show_in_reprs_or_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "a" * 40)
    monkeypatch.setenv("TESSERA_METRICS_TOKEN", "m" * 40)
    monkeypatch.setenv("TESSERA_WEBHOOKS_SECRET_KEY", "k" * 44)
    api, webhooks = ApiSettings(), WebhooksSettings()
    shown = f"{api!r} {api.model_dump()} {webhooks!r} {webhooks.model_dump_json()}"
    for secret in ("a" * 40, "m" * 40, "k" * 44):
        assert secret not in shown
    assert isinstance(api.admin_token, SecretStr)
    assert api.admin_token.get_secret_value() == "a" * 40
    assert webhooks.secret_key.get_secret_value() == "k" * 44


def test_the_webhooks_key_is_required_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESSERA_WEBHOOKS_SECRET_KEY", raising=False)
    with pytest.raises(ValidationError, match="TESSERA_WEBHOOKS_SECRET_KEY"):
        WebhooksSettings()
    monkeypatch.setenv("TESSERA_ENVIRONMENT", "test")
    monkeypatch.setenv("TESSERA_WEBHOOKS_SECRET_KEY", "changeme")
    with pytest.raises(ValidationError, match="placeholder"):
        WebhooksSettings()


def test_the_retry_schedule_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_WEBHOOKS_SECRET_KEY", "k" * 44)
    assert WebhooksSettings().retry_schedule_seconds == list(DEFAULT_RETRY_SCHEDULE_SECONDS)
    monkeypatch.setenv("TESSERA_WEBHOOK_RETRY_SCHEDULE", "0, 1.5,30")
    assert WebhooksSettings().retry_schedule_seconds == [0.0, 1.5, 30.0]


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("0,,30", "comma-separated seconds"),
        ("soon", "comma-separated seconds"),
        ("0,-1", "greater than or equal to 0"),
        ("0,inf", "finite number"),
        ("nan", "finite number"),
    ],
)
def test_a_bad_retry_schedule_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, schedule: str, problem: str
) -> None:
    monkeypatch.setenv("TESSERA_WEBHOOKS_SECRET_KEY", "k" * 44)
    monkeypatch.setenv("TESSERA_WEBHOOK_RETRY_SCHEDULE", schedule)
    with pytest.raises(ValidationError, match=problem) as refused:
        WebhooksSettings()
    assert "TESSERA_WEBHOOK_RETRY_SCHEDULE" in str(refused.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [("outbox_poll_seconds", 0), ("outbox_poll_seconds", -1), ("command_workers", 0)],
)
def test_the_issuer_refuses_a_poll_or_worker_count_that_cannot_work(name: str, value: int) -> None:
    """A zero poll would query the store in a tight loop; zero command workers is no issuer."""
    with pytest.raises(ValidationError, match=name):
        IssuerSettings.model_validate({name: value})
