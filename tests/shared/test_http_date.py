"""FreshDate: one current Date on every response, the app's own when it set one; `dated`: a
Last-Modified never later than the Date."""

from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from starlette.types import Message, Receive, Scope, Send

from shared.http_date import FreshDate, dated

APP_DATE = b"Tue, 06 May 2031 07:08:09 GMT"


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    dated = scope["path"] == "/dated"
    headers = [(b"content-type", b"text/plain")] + ([(b"Date", APP_DATE)] if dated else [])
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


async def _headers(path: str) -> list[tuple[bytes, bytes]]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await FreshDate(_app)({"type": "http", "path": path}, receive, send)
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    return list(sent[0]["headers"])


async def test_a_response_without_a_date_gets_the_current_one() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    (date,) = [value for name, value in await _headers("/") if name.lower() == b"date"]
    stamp = parsedate_to_datetime(date.decode())
    assert before <= stamp <= datetime.now(UTC)
    assert stamp - before < timedelta(seconds=5)


async def test_a_date_the_app_set_is_the_only_one() -> None:
    dates = [value for name, value in await _headers("/dated") if name.lower() == b"date"]
    assert dates == [APP_DATE]


def test_last_modified_is_never_later_than_the_date_and_still_revalidates() -> None:
    """A stored stamp ahead of the clock (rounded up, or a second after a version of the same
    second) is sent as the Date: earlier than the stamp, so a client that sends it back as
    If-Modified-Since (compared with the stamp) gets the file again, never a 304 for a version
    it lacks."""
    now = datetime(2031, 5, 6, 7, 8, 9, 400_000, tzinfo=UTC)
    ahead = datetime(2031, 5, 6, 7, 8, 12, tzinfo=UTC)
    headers = dated(ahead, now)
    assert headers == {
        "Date": "Tue, 06 May 2031 07:08:09 GMT",
        "Last-Modified": "Tue, 06 May 2031 07:08:09 GMT",
    }
    assert parsedate_to_datetime(headers["Last-Modified"]) < ahead
    past = datetime(2031, 5, 6, 7, 8, 0, tzinfo=UTC)
    headers = dated(past, now)
    assert headers["Last-Modified"] == "Tue, 06 May 2031 07:08:00 GMT"
    assert parsedate_to_datetime(headers["Last-Modified"]) == past
