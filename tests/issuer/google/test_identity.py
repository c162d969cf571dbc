"""The development service account and loading real service account key files."""

import json
import stat
from functools import cache
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from services.issuer.google.identity import (
    DEV_CLIENT_EMAIL,
    GOOGLE_TOKEN_URI,
    PUBLIC_KEY_FILE,
    SERVICE_ACCOUNT_FILE,
    GoogleIdentity,
    configured_google_identity,
    ensure_dev_google_identity,
    load_service_account,
    service_account_json,
)
from shared.google_ids import DEV_ISSUER_ID
from tests.support.concurrent_runs import outputs_of_concurrent_runs


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _same_key(left: GoogleIdentity, right: GoogleIdentity) -> bool:
    return left.private_key.private_numbers() == right.private_key.private_numbers()


def test_dev_identity_files_and_modes(tmp_path: Path) -> None:
    directory = tmp_path / "nested" / "google"
    identity = ensure_dev_google_identity(directory)

    assert _mode(directory) == 0o700
    assert _mode(directory / SERVICE_ACCOUNT_FILE) == 0o600
    assert _mode(directory / PUBLIC_KEY_FILE) == 0o644
    document = json.loads((directory / SERVICE_ACCOUNT_FILE).read_text())
    assert document["type"] == "service_account"
    assert document["client_email"] == DEV_CLIENT_EMAIL
    assert document["client_email"].endswith(".iam.gserviceaccount.com")
    assert document["token_uri"] == GOOGLE_TOKEN_URI
    assert len(document["private_key_id"]) == 40
    assert identity.is_development
    assert identity.issuer_id == DEV_ISSUER_ID
    assert identity.private_key.key_size == 2048
    assert identity.private_key_id == document["private_key_id"]
    public = serialization.load_pem_public_key((directory / PUBLIC_KEY_FILE).read_bytes())
    assert public == identity.private_key.public_key()
    assert not list(directory.glob("*.tmp"))


def test_dev_identity_is_reused(tmp_path: Path) -> None:
    first = ensure_dev_google_identity(tmp_path)
    written = (tmp_path / SERVICE_ACCOUNT_FILE).stat().st_mtime_ns
    second = ensure_dev_google_identity(tmp_path, issuer_id="1234567890")

    assert _same_key(first, second)
    assert second.private_key_id == first.private_key_id
    assert second.issuer_id == "1234567890"
    assert (tmp_path / SERVICE_ACCOUNT_FILE).stat().st_mtime_ns == written


def test_missing_public_key_is_rewritten_from_the_stored_key(tmp_path: Path) -> None:
    first = ensure_dev_google_identity(tmp_path)
    (tmp_path / PUBLIC_KEY_FILE).unlink()
    second = ensure_dev_google_identity(tmp_path)

    assert _same_key(first, second)
    assert (tmp_path / PUBLIC_KEY_FILE).read_bytes() == first.public_key_pem()


def test_dev_identity_concurrent_first_calls_agree(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    script = (
        "import sys; from pathlib import Path\n"
        "from services.issuer.google.identity import ensure_dev_google_identity\n"
        "print(ensure_dev_google_identity(Path(sys.argv[1])).private_key_id)\n"
    )
    key_ids = outputs_of_concurrent_runs(script, str(directory))
    assert key_ids == {ensure_dev_google_identity(directory).private_key_id}
    assert not list(directory.glob("*.tmp"))


def test_load_service_account_round_trip() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    email = "wallet@acme-prod.iam.gserviceaccount.com"
    document = service_account_json(key, client_email=email, token_uri="https://t.example/token")

    identity = load_service_account(document, "3388000000022222222")

    assert identity.private_key.private_numbers() == key.private_numbers()
    assert identity.client_email == email
    assert identity.private_key_id == json.loads(document)["private_key_id"]
    assert identity.token_uri == "https://t.example/token"
    assert identity.issuer_id == "3388000000022222222"
    assert not identity.is_development
    assert json.loads(document)["project_id"] == "acme-prod"


def test_missing_token_uri_means_google() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    document = json.loads(service_account_json(key, client_email="a@b.c", token_uri="x"))
    del document["token_uri"]

    identity = load_service_account(json.dumps(document).encode(), "1")

    assert identity.token_uri == GOOGLE_TOKEN_URI


@cache
def _valid_key_file() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    email = "a@b.iam.gserviceaccount.com"
    return service_account_json(key, client_email=email, token_uri=GOOGLE_TOKEN_URI)


def _valid_document() -> dict[str, str]:
    document: dict[str, str] = json.loads(_valid_key_file())
    return document


def _ec_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    encoding, key_format = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, key_format, serialization.NoEncryption()).decode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "authorized_user"}, '"type": "service_account"'),
        ({"private_key": None}, "lacks 'private_key'"),
        ({"private_key_id": ""}, "lacks 'private_key_id'"),
        ({"client_email": None}, "lacks 'client_email'"),
        ({"client_email": "not-an-email"}, "not an email address"),
        ({"private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n"}, "not an unencrypted PEM key"),
        ({"private_key": "ec"}, "must be RSA"),
        ({"token_uri": "ftp://x"}, "token_uri must be an http"),
    ],
)
def test_load_service_account_rejects_malformed_documents(
    change: dict[str, str | None], message: str
) -> None:
    document: dict[str, str | None] = {**_valid_document(), **change}
    if document["private_key"] == "ec":
        document["private_key"] = _ec_pem()
    document = {key: value for key, value in document.items() if value is not None}

    with pytest.raises(ValueError, match=message):
        load_service_account(json.dumps(document).encode(), "3388000000000000000")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
def test_load_service_account_rejects_non_documents(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_service_account(raw, "3388000000000000000")


@pytest.mark.parametrize("issuer_id", ["", "issuer", "33880000.1", " 1"])
def test_load_service_account_rejects_bad_issuer_ids(issuer_id: str) -> None:
    raw = json.dumps(_valid_document()).encode()
    with pytest.raises(ValueError, match="issuer id must be digits"):
        load_service_account(raw, issuer_id)


def test_configured_identity_without_a_key_file_is_the_dev_one(tmp_path: Path) -> None:
    identity = configured_google_identity(
        service_account_path=None, issuer_id=None, dev_directory=tmp_path / "google"
    )
    assert identity.is_development
    assert identity.issuer_id == DEV_ISSUER_ID
    assert (tmp_path / "google" / SERVICE_ACCOUNT_FILE).is_file()


def test_configured_identity_with_a_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "key.json"
    key_file.write_bytes(_valid_key_file())

    identity = configured_google_identity(
        service_account_path=key_file, issuer_id="3388000000099", dev_directory=tmp_path / "dev"
    )

    assert not identity.is_development
    assert identity.issuer_id == "3388000000099"
    assert not (tmp_path / "dev").exists()
    with pytest.raises(ValueError, match="needs its Wallet issuer id"):
        configured_google_identity(
            service_account_path=key_file, issuer_id=None, dev_directory=tmp_path / "dev"
        )
    with pytest.raises(ValueError, match="cannot read"):
        configured_google_identity(
            service_account_path=tmp_path / "absent.json", issuer_id="1", dev_directory=tmp_path
        )
