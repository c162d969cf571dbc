"""The issuer process refuses to start with a signing identity whose passes would not verify,
and says why in one log line (no traceback)."""

import datetime
import json
import subprocess
from pathlib import Path

import pytest

from shared.runner import STARTUP_FAILURE
from tessera.processes import base_env, free_port, service_argv
from tests.support import apple_pki

pytestmark = pytest.mark.slow


def _start_issuer(
    tmp_path: Path, identity: dict[str, str], service: str = "issuer"
) -> subprocess.CompletedProcess[str]:
    env = base_env() | identity
    env |= {
        "TESSERA_ENVIRONMENT": "test",
        "TESSERA_DATA_DIR": str(tmp_path / "data"),
        f"TESSERA_{service.upper()}_PORT": str(free_port()),
        # Nothing listens there: the identity must stop the start before any connection.
        "TESSERA_NATS_URL": f"nats://127.0.0.1:{free_port()}",
        "TESSERA_MONGODB_URL": f"mongodb://127.0.0.1:{free_port()}",
    }
    return subprocess.run(
        service_argv(service), env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == STARTUP_FAILURE, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = [json.loads(text) for text in result.stderr.splitlines() if text.startswith("{")]
    assert line["level"] == "critical"
    message: str = line["msg"]
    return message


def test_wwdr_g3_instead_of_g4_stops_the_issuer(tmp_path: Path) -> None:
    root = apple_pki.apple_root()
    g4, g3 = apple_pki.wwdr(root, "G4"), apple_pki.wwdr(root, "G3")
    identity = apple_pki.identity_env(tmp_path / "apple", apple_pki.pass_certificate(g4), g3)

    message = _refusal(_start_issuer(tmp_path, identity))

    assert message.startswith("cannot start: Apple signing identity (")
    assert f"TESSERA_APPLE_WWDR_CERTIFICATE_PATH={tmp_path / 'apple' / 'wwdr.pem'}" in message
    assert "(OU=G4), but the intermediate certificate given with it is" in message
    assert "this is WWDR G3; this pass certificate was issued by WWDR G4" in message
    assert "download AppleWWDRCAG4.cer from https://www.apple.com/certificateauthority/" in message


def test_the_events_service_refuses_it_the_same_way(tmp_path: Path) -> None:
    """The events service signs its APNs connection with the same identity."""
    root = apple_pki.apple_root()
    g4, g3 = apple_pki.wwdr(root, "G4"), apple_pki.wwdr(root, "G3")
    identity = apple_pki.identity_env(tmp_path / "apple", apple_pki.pass_certificate(g4), g3)

    message = _refusal(_start_issuer(tmp_path, identity, "events"))

    assert "this is WWDR G3; this pass certificate was issued by WWDR G4" in message


def test_an_expired_pass_certificate_stops_the_issuer(tmp_path: Path) -> None:
    g4 = apple_pki.wwdr(apple_pki.apple_root(), "G4")
    ended = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=3)
    signer = apple_pki.pass_certificate(g4, not_after=ended)
    identity = apple_pki.identity_env(tmp_path / "apple", signer, g4)

    message = _refusal(_start_issuer(tmp_path, identity))

    assert f"the pass certificate 'Pass Type ID: {apple_pki.PASS_TYPE_IDENTIFIER}'" in message
    assert f"expired on {ended:%Y-%m-%d %H:%M} UTC" in message
