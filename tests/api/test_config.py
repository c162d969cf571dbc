"""The api's settings refuse values it cannot work with safely."""

from datetime import timedelta

import pytest
from pydantic import ValidationError

from services.api.config import ApiSettings


@pytest.mark.parametrize("ttl", ["PT0S", "-PT1H", "PT1M", "PT59M", "PT48H1S", "P7D"])
def test_an_idempotency_record_shorter_than_client_retries_or_longer_than_commands_is_refused(
    monkeypatch: pytest.MonkeyPatch, ttl: str
) -> None:
    """A record gone before its client retries makes the retry run the request again (a
    second pass, say): zero or negative made every replay a new request. One kept longer than
    the owners keep their commands' results (48 h) made a retry after a 5xx, past those, run
    its command a second time."""
    monkeypatch.setenv("TESSERA_API_IDEMPOTENCY_TTL", ttl)
    with pytest.raises(ValidationError, match="idempotency_ttl"):
        ApiSettings()


@pytest.mark.parametrize(("ttl", "expected"), [("PT24H", 24), ("PT1H", 1), ("P2D", 48)])
def test_an_idempotency_ttl_of_an_hour_or_more_is_read(
    monkeypatch: pytest.MonkeyPatch, ttl: str, expected: int
) -> None:
    monkeypatch.setenv("TESSERA_API_IDEMPOTENCY_TTL", ttl)
    assert ApiSettings().idempotency_ttl == timedelta(hours=expected)
