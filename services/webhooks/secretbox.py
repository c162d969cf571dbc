"""Webhook signing secrets: made here, shown once, stored encrypted (they must stay readable to
sign, so they cannot be hashed). MultiFernet lets an operator rotate the key: list the new key
first and the old ones after it."""

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from shared.ids import random_token


def new_secret() -> str:
    """`whsec_` and 32 random bytes, base64url."""
    return random_token("webhook_secret", 32)


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
