"""Google service-account identities: the production key file, or a generated development key.

The development key has the production shape, so everything downstream runs the same code;
Google does not know it (docs/google-wallet.md#development-identity).
"""

import fcntl
import hashlib
import json
import re
import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.files import write_atomic
from shared.google_ids import DEV_ISSUER_ID

SERVICE_ACCOUNT_FILE = "google-service-account.json"
PUBLIC_KEY_FILE = "google-public-key.pem"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 - a URL, not a secret
DEV_PROJECT_ID = "tessera-dev"
DEV_CLIENT_EMAIL = f"tessera-dev@{DEV_PROJECT_ID}.iam.gserviceaccount.com"
_LOCK_FILE = ".google.lock"
_ISSUER_ID = re.compile(r"^[0-9]{1,32}$")
_REQUIRED_KEYS = ("private_key_id", "private_key", "client_email")


@dataclass(frozen=True)
class GoogleIdentity:
    issuer_id: str  # the Google Wallet issuer id (digits), prefix of every class/object id
    client_email: str  # the service account's email: `iss` of every JWT we sign
    private_key: rsa.RSAPrivateKey
    private_key_id: str  # `kid` header of every JWT we sign
    token_uri: str  # OAuth2 token endpoint for the JWT-bearer grant
    is_development: bool = False  # generated locally; Google will refuse it

    def public_key_pem(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def load_service_account(json_bytes: bytes, issuer_id: str) -> GoogleIdentity:
    """Build an identity from a service account JSON key and a Wallet issuer id.

    Raises ValueError, naming the problem, for anything that is not a usable RSA key file.
    """
    if not _ISSUER_ID.match(issuer_id):
        raise ValueError(f"Google Wallet issuer id must be digits, got {issuer_id!r}")
    try:
        document = json.loads(json_bytes)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"service account key is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("service account key must be a JSON object")
    if document.get("type") != "service_account":
        raise ValueError(
            f'service account key must have "type": "service_account", got {document.get("type")!r}'
        )
    for key in _REQUIRED_KEYS:
        if not isinstance(document.get(key), str) or not document[key].strip():
            raise ValueError(f"service account key lacks {key!r} (a non-empty string)")
    if "@" not in document["client_email"]:
        raise ValueError(f"client_email {document['client_email']!r} is not an email address")
    token_uri = document.get("token_uri", GOOGLE_TOKEN_URI)
    if not isinstance(token_uri, str) or not token_uri.startswith(("https://", "http://")):
        raise ValueError(f"token_uri must be an http(s) URL, got {token_uri!r}")
    return GoogleIdentity(
        issuer_id=issuer_id,
        client_email=document["client_email"],
        private_key=_rsa_key(document["private_key"]),
        private_key_id=document["private_key_id"],
        token_uri=token_uri,
    )


def ensure_dev_google_identity(directory: Path, issuer_id: str = DEV_ISSUER_ID) -> GoogleIdentity:
    """Load the development service account stored in `directory`, creating it on first use."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The exclusive lock makes concurrent first calls agree: one process generates, the others
    # wait and then load its key instead of writing a second one.
    with open(directory / _LOCK_FILE, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            key_file = directory / SERVICE_ACCOUNT_FILE
            if not key_file.is_file():
                _write_dev_service_account(directory)
            identity = load_service_account(key_file.read_bytes(), issuer_id)
            if not (directory / PUBLIC_KEY_FILE).is_file():
                write_atomic(directory / PUBLIC_KEY_FILE, identity.public_key_pem(), 0o644)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return replace(identity, is_development=True)


def configured_google_identity(
    *, service_account_path: Path | None, issuer_id: str | None, dev_directory: Path
) -> GoogleIdentity:
    """The production identity when a key file is configured, else the development one."""
    if service_account_path is None:
        return ensure_dev_google_identity(dev_directory, issuer_id or DEV_ISSUER_ID)
    if issuer_id is None:
        raise ValueError("a Google service account key needs its Wallet issuer id as well")
    try:
        key_file = service_account_path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the Google service account key: {exc}") from exc
    return load_service_account(key_file, issuer_id)


def service_account_json(key: rsa.RSAPrivateKey, *, client_email: str, token_uri: str) -> bytes:
    """A service account key file in Google's format for `key` (development and tests)."""
    public_der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    project_id = client_email.partition("@")[2].split(".")[0] or DEV_PROJECT_ID
    document: dict[str, Any] = {
        "type": "service_account",
        "project_id": project_id,
        # Google's key ids are 40 hex digits; a hash of the public key is stable and unique.
        "private_key_id": hashlib.sha1(public_der, usedforsecurity=False).hexdigest(),
        "private_key": private_pem.decode("ascii"),
        "client_email": client_email,
        "client_id": str(10**20 + secrets.randbelow(9 * 10**20)),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/"
        + client_email.replace("@", "%40"),
        "universe_domain": "googleapis.com",
    }
    return json.dumps(document, indent=2).encode("utf-8") + b"\n"


def _rsa_key(pem: str) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"service account private_key is not an unencrypted PEM key: {exc}"
        ) from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"service account private_key must be RSA, got {type(key).__name__}")
    return key


def _write_dev_service_account(directory: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # The public key first and the key file last: the key file's presence marks completion.
    write_atomic(directory / PUBLIC_KEY_FILE, public_pem, 0o644)
    document = service_account_json(key, client_email=DEV_CLIENT_EMAIL, token_uri=GOOGLE_TOKEN_URI)
    write_atomic(directory / SERVICE_ACCOUNT_FILE, document, 0o600)
