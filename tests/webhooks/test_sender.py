"""One attempt against a real HTTP receiver on loopback: what is sent, what counts as success,
that the request goes to an address checked at this attempt, and the wait a 429 or 503 asks
for with Retry-After."""

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.webhooks.resolver import resolver
from services.webhooks.sender import RESPONSE_BODY_CHARS, Outcome, Sender, retry_after_seconds
from tests.support.receiver import Receiver, running_receiver

BODY = '{"id":"psEvnt_1","type":"pass.issued"}'
SIGNED = {"svc-signature": "t=1,v1=ab", "svc-event-type": "pass.issued", "webhook-id": "whd_1"}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running:
        yield running


def sender(
    *, allow_private: bool = True, timeout: float = 5.0, hosts: Path | None = None
) -> Sender:
    return Sender(
        timeout_seconds=timeout,
        allow_private=allow_private,
        max_connections=4,
        resolver=resolver(hosts),
    )


async def send(s: Sender, url: str) -> Outcome:
    try:
        return await s.send(url, BODY, SIGNED)
    finally:
        await s.aclose()


async def test_a_2xx_succeeds_and_the_request_is_exact(receiver: Receiver) -> None:
    receiver.behave("/ok", status=204, body="")
    assert await send(sender(), receiver.url("/ok")) == Outcome(True, 204, "")
    [request] = receiver.requests("/ok")
    assert request.body == BODY.encode()
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == "svc-webhooks/1.0"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"
    for name, value in SIGNED.items():
        assert request.headers[name] == value


async def test_other_statuses_fail_and_keep_the_body(receiver: Receiver) -> None:
    receiver.behave("/down", status=503, body="maintenance")
    assert await send(sender(), receiver.url("/down")) == Outcome(False, 503, "maintenance")


async def test_a_redirect_fails_and_is_not_followed(receiver: Receiver) -> None:
    receiver.behave("/moved", redirect_to=receiver.url("/elsewhere"), body="")
    outcome = await send(sender(), receiver.url("/moved"))
    assert (outcome.ok, outcome.response_status) == (False, 302)
    assert len(receiver.requests("/moved")) == 1
    assert receiver.requests("/elsewhere") == []


async def test_a_slow_endpoint_fails_at_the_timeout(receiver: Receiver) -> None:
    receiver.behave("/slow", delay_seconds=3.0)
    outcome = await send(sender(timeout=0.3), receiver.url("/slow"))
    assert outcome == Outcome(False, None, "no response within 0.3 s")


@asynccontextmanager
async def half_answering(end: str) -> AsyncIterator[str]:
    """A raw HTTP endpoint on loopback that sends `200 OK` and its headers, then only part of
    the body it announced: then it stalls (`end` "stall") or closes the connection ("close")."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        if end == "stall":
            await reader.read()  # until the sender gives up and closes
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/hook"


async def test_a_2xx_whose_body_stalls_fails_at_the_timeout() -> None:
    """The status line and headers count, and so does the body: a 200 whose body never ends
    is no success (it was recorded delivered)."""
    async with half_answering("stall") as url:
        outcome = await send(sender(timeout=0.5), url)
    assert outcome == Outcome(False, 200, "the response body did not arrive within 0.5 s")


async def test_a_2xx_whose_connection_closes_mid_body_fails() -> None:
    async with half_answering("close") as url:
        outcome = await send(sender(), url)
    assert (outcome.ok, outcome.response_status) == (False, 200)
    assert (outcome.response_body or "").startswith(
        "the response body was cut short: RemoteProtocolError"
    )


async def test_the_response_body_is_kept_to_2000_characters(receiver: Receiver) -> None:
    receiver.behave("/long", status=500, body="é" * 2500 + "tail")
    outcome = await send(sender(), receiver.url("/long"))
    assert outcome.response_body == "é" * RESPONSE_BODY_CHARS


async def test_a_closed_port_fails_without_a_status(receiver: Receiver) -> None:
    url = receiver.url("/x").replace(str(receiver.port), "9")  # discard port: nothing listens
    outcome = await send(sender(), url)
    assert (outcome.ok, outcome.response_status) == (False, None)
    assert outcome.response_body is not None
    assert outcome.response_body.startswith("request failed: ConnectError")


async def test_the_request_goes_to_the_checked_address_with_the_host_name(
    receiver: Receiver, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts"
    # 127.0.0.2 is loopback too, but nothing listens there: the next checked address is used.
    hosts.write_text("127.0.0.2 hooks.example.test\n127.0.0.1 hooks.example.test\n")
    receiver.behave("/named")
    url = f"http://hooks.example.test:{receiver.port}/named"
    assert (await send(sender(hosts=hosts), url)).ok
    [request] = receiver.requests("/named")
    assert request.headers["host"] == f"hooks.example.test:{receiver.port}"


async def test_an_international_host_is_sent_in_its_ascii_form(
    receiver: Receiver, tmp_path: Path
) -> None:
    """Sent as Unicode, the Host header failed to encode: every attempt failed, and died."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 xn--mnchen-3ya.test\n")
    receiver.behave("/idn")
    assert (await send(sender(hosts=hosts), f"http://münchen.test:{receiver.port}/idn")).ok
    [request] = receiver.requests("/idn")
    assert request.headers["host"] == f"xn--mnchen-3ya.test:{receiver.port}"


async def test_a_private_address_is_refused_and_nothing_is_sent(
    receiver: Receiver, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 rebound.example.test\n")
    url = f"http://rebound.example.test:{receiver.port}/private"
    outcome = await send(sender(allow_private=False, hosts=hosts), url)
    assert (outcome.ok, outcome.response_status) == (False, None)
    assert outcome.response_body is not None
    assert outcome.response_body.startswith("refused, nothing was sent")
    assert "127.0.0.1" in outcome.response_body
    assert receiver.requests() == []


@pytest.mark.parametrize("status", [429, 503])
async def test_a_429_or_503_reports_its_retry_after(receiver: Receiver, status: int) -> None:
    receiver.behave("/busy", status=status, body="slow down", headers={"Retry-After": "7"})
    outcome = await send(sender(), receiver.url("/busy"))
    assert outcome == Outcome(False, status, "slow down", retry_after=7.0)


@pytest.mark.parametrize("status", [200, 500])
async def test_other_statuses_ignore_retry_after(receiver: Receiver, status: int) -> None:
    receiver.behave("/other", status=status, headers={"Retry-After": "7"})
    assert (await send(sender(), receiver.url("/other"))).retry_after is None


NOW = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("2", 2.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),  # an HTTP-date, 30 s after NOW
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Wed, 21 Oct 2015 07:20:00 GMT", 0.0),  # already past: no wait, never negative
        ("Wednesday, 21-Oct-15 07:28:30 GMT", 30.0),  # RFC 850's form
        ("Wed Oct 21 07:28:30 2015", 30.0),  # asctime's form, GMT without saying so
        ("120, 60", 120.0),  # the header sent twice, joined: the longer wait
    ],
)
def test_retry_after_in_seconds_or_as_a_date(header: str, seconds: float) -> None:
    assert retry_after_seconds(header, NOW) == seconds


@pytest.mark.parametrize(
    "header",
    [None, "", "-5", "1.5", "soon", "2 seconds", "0x10", "²", "٣", "Wed, 21 Oct 2015 07:28:30"],
)
def test_a_missing_or_malformed_retry_after_is_none(header: str | None) -> None:
    # A date without its zone names no instant; digits are ASCII digits only (RFC 9110).
    assert retry_after_seconds(header, NOW) is None
