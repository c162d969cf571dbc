"""`Date` on every response, and a `Last-Modified` never later than it.

uvicorn's own Date header is refreshed once a second by its main loop, so it can lag the
response it is on by a second or more, and an app that sets Date itself gets a second Date
beside it. The runner (shared/runner.py) turns uvicorn's off and wraps every service in
`FreshDate`, which adds Date when the response starts, unless the app set one.

The two endpoints that serve a .pkpass (the api's download and the events service's Apple web
service) set Date themselves, with `dated`, from the same reading of the clock as Last-Modified:
HTTP forbids a Last-Modified later than Date, and a pass file's stored stamp can be ahead of the
clock (services/issuer/repository.py `last_modified_after` rounds it up, and puts each version
at least a second after the one before).
"""

from datetime import UTC, datetime
from email.utils import format_datetime, formatdate, parsedate_to_datetime

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class FreshDate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_dated(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"date" for name, _ in headers):
                    headers.append((b"date", formatdate(usegmt=True).encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_dated)


def http_date(moment: datetime) -> str:
    return format_datetime(moment.astimezone(UTC), usegmt=True)


def dated(last_modified: datetime, now: datetime) -> dict[str, str]:
    """The `Date` and `Last-Modified` of a response made at `now` about something last modified
    at `last_modified`: that, or `now` when it is later. Safe for revalidation as long as
    If-Modified-Since is compared with the stored `last_modified`, not with the header: a client
    that sends the earlier value back gets the resource again (a spare 200), never a 304 for a
    version it lacks."""
    return {"Date": http_date(now), "Last-Modified": http_date(min(last_modified, now))}


def modified_since(if_modified_since: str | None, last_modified: datetime) -> bool:
    """Whether a copy dated `If-Modified-Since` is older than `last_modified`: True too when
    the header is absent or is no date HTTP knows (RFC 9110 says to ignore it then), a number
    too large for a date included (Python raises OverflowError for those)."""
    if not if_modified_since:
        return True
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, OverflowError):
        return True
    if since.tzinfo is None:  # an HTTP date without "GMT": read it as UTC
        since = since.replace(tzinfo=UTC)
    return since < last_modified
