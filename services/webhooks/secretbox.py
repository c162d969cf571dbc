"""Webhook signing secrets: made here, shown once, stored encrypted (they must stay readable to
sign, so they cannot be hashed). MultiFernet lets an operator rotate the key: list the new key
first and the old ones after it."""

import base64
import secrets

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from shared.ids import PREFIXES


def new_secret() -> str:
    """`whsec_` and 32 random bytes in standard, padded base64 (44 characters).

    Standard Webhooks verifiers take the key from the base64 after `whsec_`; their libraries
    decode standard base64 only (Python's silently drops `-` and `_`, Node's refuses them), so
    base64url would give them a different key than ours.
    """
    return f"{PREFIXES['webhook_secret']}_{base64.b64encode(secrets.token_bytes(32)).decode()}"


class SecretBox:
    def __init__(self, keys: str):
        try:
            self._fernet = MultiFernet([Fernet(key.strip()) for key in keys.split(",")])
        except ValueError as exc:
            raise ValueError("TESSERA_WEBHOOKS_SECRET_KEY must hold Fernet keys") from exc

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise ValueError(
                "a webhook secret cannot be decrypted with the configured keys"
            ) from exc
