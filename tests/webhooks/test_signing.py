"""Signatures: the doc's test vector, and independent verifiers (stripe, standardwebhooks, the
doc's own Python and Node snippets) accept a signed body and refuse it after one byte changes."""

import base64
import json
import re
import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import stripe
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.webhooks.secretbox import new_secret
from services.webhooks.signing import signature_headers, standard_signature, stripe_signature

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
EVER = 10**10  # a tolerance that accepts the vector's 2023 timestamp


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _code(section: str, language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", _section(section), re.DOTALL)
    assert found is not None, f"no {language} block in {section}"
    return found.group(1)


def vector() -> dict[str, str]:
    lines = _code("Test vector", "text").splitlines()
    return {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in lines)}


def test_the_doc_vector_matches_the_code() -> None:
    v = vector()
    t = int(v["t"])
    assert stripe_signature(v["secret"], t, v["body"]) == v["svc-signature"]
    assert standard_signature(v["secret"], v["webhook-id"], t, v["body"]) == v["webhook-signature"]
    headers = signature_headers(v["secret"], v["webhook-id"], "pass.issued", t, v["body"])
    assert headers == {
        "svc-signature": v["svc-signature"],
        "svc-event-type": "pass.issued",
        "webhook-id": v["webhook-id"],
        "webhook-timestamp": v["t"],
        "webhook-signature": v["webhook-signature"],
    }


def test_the_doc_vector_matches_independent_implementations() -> None:
    v = vector()
    stripe.WebhookSignature.verify_header(v["body"], v["svc-signature"], v["secret"], EVER)
    moment = datetime.fromtimestamp(int(v["t"]), UTC)
    assert Webhook(v["secret"]).sign(v["webhook-id"], moment, v["body"]) == v["webhook-signature"]
    assert json.loads(v["body"])["type"] == "pass.issued"


def test_the_doc_python_snippet_verifies_the_vector_and_refuses_a_changed_byte() -> None:
    v = vector()
    scope: dict[str, Any] = {}
    exec(_code("Verifying a delivery", "python"), scope)  # noqa: S102 - our own doc's snippet
    verify = scope["verify"]
    body = v["body"].encode()
    assert verify(body, v["svc-signature"], v["secret"], EVER) is True
    assert verify(body.replace(b"A12", b"A13"), v["svc-signature"], v["secret"], EVER) is False
    assert verify(body, v["svc-signature"], v["secret"]) is False  # too old for 5 minutes


@pytest.mark.skipif(shutil.which("node") is None, reason="node not found on PATH")
def test_the_doc_node_snippet_verifies_the_vector(tmp_path: Path) -> None:
    v = vector()
    script = tmp_path / "verify.cjs"
    script.write_text(
        _code("Verifying a delivery", "js")
        + f"const v = {json.dumps(v)};\n"
        + f"console.log(verify(v.body, v['svc-signature'], v.secret, {EVER}));\n"
        + "console.log(verify(v.body.replace('A12', 'A13'), v['svc-signature'], v.secret, "
        + f"{EVER}));\n"
    )
    node = shutil.which("node")
    assert node is not None
    out = subprocess.run([node, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["true", "false"]


def _signed_now(body: str) -> tuple[str, dict[str, str]]:
    secret = new_secret()
    return secret, signature_headers(secret, "whd_x", "pass.voided", int(time.time()), body)


def _flip_one_byte(body: str, index: int) -> str:
    raw = bytearray(body.encode())
    raw[index] = raw[index] ^ 0x01
    return raw.decode()


@pytest.mark.parametrize("index", [0, 10, -2])
def test_stripe_verifies_and_refuses_one_changed_byte(index: int) -> None:
    body = '{"id":"psEvnt_1","type":"pass.voided","data":{"pass":{"voided":true}}}'
    secret, headers = _signed_now(body)
    stripe.WebhookSignature.verify_header(body, headers["svc-signature"], secret, 300)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(
            _flip_one_byte(body, index), headers["svc-signature"], secret, 300
        )


@pytest.mark.parametrize("index", [0, 10, -2])
def test_standardwebhooks_verifies_and_refuses_one_changed_byte(index: int) -> None:
    body = '{"id":"psEvnt_1","type":"pass.voided","data":{"pass":{"voided":true}}}'
    secret, headers = _signed_now(body)
    assert Webhook(secret).verify(body, headers) == json.loads(body)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(_flip_one_byte(body, index), headers)


def test_secrets_are_32_random_bytes_in_standard_base64() -> None:
    secrets = {new_secret() for _ in range(200)}
    assert len(secrets) == 200
    for secret in secrets:
        assert secret.startswith("whsec_")
        assert len(secret) == 50
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_several_secrets_sign_current_first_in_both_headers() -> None:
    v = vector()
    t = int(v["t"])
    old = new_secret()
    headers = signature_headers([v["secret"], old], v["webhook-id"], "pass.issued", t, v["body"])
    old_stripe = stripe_signature(old, t, v["body"]).removeprefix(f"t={t},")
    assert headers["svc-signature"] == f"{v['svc-signature']},{old_stripe}"
    old_standard = standard_signature(old, v["webhook-id"], t, v["body"])
    assert headers["webhook-signature"] == f"{v['webhook-signature']} {old_standard}"
    assert signature_headers((v["secret"],), v["webhook-id"], "pass.issued", t, v["body"]) == (
        signature_headers(v["secret"], v["webhook-id"], "pass.issued", t, v["body"])
    )
    with pytest.raises(ValueError, match="at least one secret"):
        signature_headers([], v["webhook-id"], "pass.issued", t, v["body"])


def test_each_of_several_secrets_verifies_with_both_libraries_and_no_other_does() -> None:
    body = '{"id":"psEvnt_1","type":"pass.voided","data":{"pass":{"voided":true}}}'
    current, previous, older = new_secret(), new_secret(), new_secret()
    headers = signature_headers(
        [current, previous, older], "whd_x", "pass.voided", int(time.time()), body
    )
    assert headers["svc-signature"].count(",v1=") == 3
    assert len(headers["webhook-signature"].split(" ")) == 3
    for secret in (current, previous, older):
        stripe.WebhookSignature.verify_header(body, headers["svc-signature"], secret, 300)
        assert Webhook(secret).verify(body, headers) == json.loads(body)
    stranger = new_secret()
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(body, headers["svc-signature"], stranger, 300)
    with pytest.raises(WebhookVerificationError):
        Webhook(stranger).verify(body, headers)


def test_the_doc_snippets_accept_each_secret_of_a_rotation(tmp_path: Path) -> None:
    """During a grace period `svc-signature` holds one `v1` per secret: the snippets must accept
    any of them, not only the last (which is the oldest secret)."""
    v = vector()
    t = int(v["t"])
    old, stranger = new_secret(), new_secret()
    header = stripe_signature([v["secret"], old], t, v["body"])
    scope: dict[str, Any] = {}
    exec(_code("Verifying a delivery", "python"), scope)  # noqa: S102 - our own doc's snippet
    verify = scope["verify"]
    body = v["body"].encode()
    results = [verify(body, header, secret, EVER) for secret in (v["secret"], old, stranger)]
    assert results == [True, True, False]
    assert verify(body.replace(b"A12", b"A13"), header, old, EVER) is False
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found on PATH")
    script = tmp_path / "verify.cjs"
    script.write_text(
        _code("Verifying a delivery", "js")
        + f"const [body, header] = {json.dumps([v['body'], header])};\n"
        + "".join(
            f"console.log(verify(body, header, {json.dumps(s)}, {EVER}));\n"
            for s in (v["secret"], old, stranger)
        )
    )
    out = subprocess.run([node, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["true", "true", "false"]
