"""The api's settings refuse values it cannot work with safely."""

from datetime import timedelta

import pytest
from pydantic import ValidationError

from services.api.config import ApiSettings


@pytest.mark.parametrize("ttl", ["PT0S", "-PT1H", "PT1M", "PT59M"])
def test_an_idempotency_record_shorter_than_client_retries_is_refused(
    monkeypatch: pytest.MonkeyPatch, ttl: str
) -> None:
    """A record gone before its client retries makes the retry run the request again (a
    second pass, say): zero or negative made every replay a new request."""
    monkeypatch.setenv("TESSERA_API_IDEMPOTENCY_TTL", ttl)
    with pytest.raises(ValidationError, match="idempotency_ttl"):
        ApiSettings()


@pytest.mark.parametrize(("ttl", "expected"), [("PT24H", 24), ("PT1H", 1), ("P2D", 48)])
def test_an_idempotency_ttl_of_an_hour_or_more_is_read(
    monkeypatch: pytest.MonkeyPatch, ttl: str, expected: int
) -> None:
    monkeypatch.setenv("TESSERA_API_IDEMPOTENCY_TTL", ttl)
    assert ApiSettings().idempotency_ttl == timedelta(hours=expected)
