"""A stack's "production" credentials for tests of live mode: an Apple identity loaded from
files (a development CA, as a real one would be) and a Google service account whose REST calls
go to a local fake of Google's API (tests/support/fake_google.py)."""

from pathlib import Path

from services.issuer.google.identity import ensure_dev_google_identity
from shared.apple_identity import ensure_dev_identity
from tests.support.fake_google import FakeGoogle

ISSUER_ID = "3388000000012345678"
LIVE_PASS_TYPE = "pass.com.example.live"


def live_credentials(
    work_dir: Path,
    fake_google: FakeGoogle,
    *,
    issuer_id: str = ISSUER_ID,
    pass_type: str = LIVE_PASS_TYPE,
) -> dict[str, str]:
    """Make the identities under `work_dir`, register the service account with the fake, and
    answer the settings that configure a stack with them."""
    apple, google_dir = work_dir / "apple", work_dir / "google"
    ensure_dev_identity(apple, pass_type_identifier=pass_type)
    google = ensure_dev_google_identity(google_dir, issuer_id)
    fake_google.register(google.client_email, google.public_key_pem())
    return {
        "TESSERA_PASS_TYPE_IDENTIFIER": pass_type,
        "TESSERA_APPLE_CERTIFICATE_PATH": str(apple / "signer.pem"),
        "TESSERA_APPLE_PRIVATE_KEY_PATH": str(apple / "signer-key.pem"),
        "TESSERA_APPLE_WWDR_CERTIFICATE_PATH": str(apple / "wwdr.pem"),
        "TESSERA_ISSUER_GOOGLE_SERVICE_ACCOUNT_PATH": str(
            google_dir / "google-service-account.json"
        ),
        "TESSERA_ISSUER_GOOGLE_ISSUER_ID": issuer_id,
        "TESSERA_ISSUER_GOOGLE_API_BASE_URL": fake_google.api_base_url,
        "TESSERA_ISSUER_GOOGLE_TOKEN_URI": fake_google.token_uri,
        # An outage's retries come every second.
        "TESSERA_ISSUER_GOOGLE_RETRY_MAX_SECONDS": "1",
    }
