"""Warnings before a certificate of the signing identity expires: in the issuer's log (at
start and once a day) and in the `signing` detail of its /readyz, which stays 200 until a
certificate has actually expired."""

import asyncio
import datetime
import json
import logging
from collections.abc import Iterator

import httpx2
import pytest

from services.issuer.signing_expiry import SigningExpiryWatch
from shared.apple_certificates import SigningIdentityError
from shared.apple_identity import SigningIdentity, load_identity
from shared.clock import iso
from tests.support import apple_pki
from tests.support.polling import poll
from tests.support.stack import Stack, new_stack

DAY = datetime.timedelta(days=1)


class MovableClock:
    def __init__(self) -> None:
        self.moment = datetime.datetime.now(datetime.UTC)

    def now(self) -> datetime.datetime:
        return self.moment


@pytest.fixture(scope="module")
def ending_in_10_days() -> tuple[apple_pki.Issued, apple_pki.Issued]:
    """A pass certificate that ends in 10 days, and its WWDR G4 intermediate."""
    g4 = apple_pki.wwdr(apple_pki.apple_root(), "G4")
    end = datetime.datetime.now(datetime.UTC) + 10 * DAY
    return apple_pki.pass_certificate(g4, not_after=end), g4


@pytest.fixture
def identity(ending_in_10_days: tuple[apple_pki.Issued, apple_pki.Issued]) -> SigningIdentity:
    signer, g4 = ending_in_10_days
    return load_identity(
        certificate_pem=signer.pem(),
        private_key_pem=signer.key_pem(),
        key_password=None,
        wwdr_pem=g4.pem(),
        pass_type_identifier=apple_pki.PASS_TYPE_IDENTIFIER,
        team_identifier=apple_pki.TEAM_IDENTIFIER,
    )


def _signing_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [
        (record.levelno, record.getMessage())
        for record in caplog.records
        if record.name == "services.issuer.signing_expiry"
    ]


async def test_within_30_days_a_warning_while_still_ready(
    identity: SigningIdentity, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MovableClock()
    watch = SigningExpiryWatch(identity, clock)
    caplog.set_level(logging.INFO)

    watch.log_notices()
    await watch.check()  # still valid: /readyz stays ready

    ((level, message),) = _signing_lines(caplog)
    assert level == logging.WARNING
    assert message.startswith("signing identity: the pass certificate 'Pass Type ID: ")
    not_after = identity.certificate.not_valid_after_utc
    assert f"expires on {not_after:%Y-%m-%d %H:%M} UTC, in 10 days" in message
    detail = watch.detail()
    assert detail["status"] == "expiring"
    assert detail["certificates"] == [
        {
            "role": "pass certificate",
            "name": f"'Pass Type ID: {apple_pki.PASS_TYPE_IDENTIFIER}' "
            f"(OU={apple_pki.TEAM_IDENTIFIER})",
            "not_after": iso(not_after),
        },
        {
            "role": "WWDR intermediate",
            "name": f"'{apple_pki.WWDR_COMMON_NAME}' (OU=G4)",
            "not_after": iso(identity.intermediate.not_valid_after_utc),
        },
    ]
    assert detail["warnings"] == [message.removeprefix("signing identity: ")]


async def test_before_the_window_nothing_and_after_the_end_an_error(
    identity: SigningIdentity, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MovableClock()
    watch = SigningExpiryWatch(identity, clock)
    caplog.set_level(logging.INFO)

    clock.moment -= 30 * DAY  # 40 days left
    watch.log_notices()
    assert _signing_lines(caplog) == []
    assert watch.detail()["status"] == "ok"
    assert watch.detail()["warnings"] == []

    clock.moment += 41 * DAY  # a day after the end
    watch.log_notices()
    ((level, message),) = _signing_lines(caplog)
    assert level == logging.ERROR
    assert "expired on" in message
    assert watch.detail()["status"] == "invalid"
    with pytest.raises(SigningIdentityError, match=r"the pass certificate .* expired on"):
        await watch.check()


async def test_the_watch_warns_at_start_and_again_each_period(
    identity: SigningIdentity, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    watch = SigningExpiryWatch(identity, MovableClock(), every_seconds=0.05)
    watch.start()
    try:
        # Once at start, then once per period (a day in production).
        await asyncio.to_thread(poll, lambda: len(_signing_lines(caplog)) >= 2 or None)
    finally:
        await watch.stop()
    assert {level for level, _ in _signing_lines(caplog)} == {logging.WARNING}


@pytest.fixture(scope="module")
def issuer(
    nats_url: str,
    mongo_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    ending_in_10_days: tuple[apple_pki.Issued, apple_pki.Issued],
) -> Iterator[Stack]:
    """The issuer process alone, configured with the identity that ends in 10 days."""
    stack = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("expiring"), replicas=1)
    signer, g4 = ending_in_10_days
    stack.extra_env = apple_pki.identity_env(stack.work_dir / "apple", signer, g4)
    try:
        stack.start("issuer")
        yield stack
    finally:
        stack.stop()


@pytest.mark.slow
def test_the_running_issuer_logs_the_warning_and_shows_it_in_readyz(
    issuer: Stack, ending_in_10_days: tuple[apple_pki.Issued, apple_pki.Issued]
) -> None:
    not_after = ending_in_10_days[0].certificate.not_valid_after_utc
    readyz = httpx2.get(f"http://{issuer.host}:{issuer.api_port + 2}/readyz")

    assert readyz.status_code == 200
    body = readyz.json()
    assert body["ready"] is True
    assert body["checks"]["signing"] == "ok"
    signing = body["details"]["signing"]
    assert signing["status"] == "expiring"
    (warning,) = signing["warnings"]
    assert warning.startswith("the pass certificate 'Pass Type ID: pass.com.example.tickets'")
    assert f"expires on {not_after:%Y-%m-%d %H:%M} UTC" in warning

    def warning_lines() -> list[dict[str, str]]:
        lines = [json.loads(line) for line in issuer.log_text("issuer").splitlines()]
        return [line for line in lines if line.get("logger") == "services.issuer.signing_expiry"]

    (line,) = poll(lambda: warning_lines() or None)
    assert line["level"] == "warning"
    assert line["msg"] == f"signing identity: {warning}"
