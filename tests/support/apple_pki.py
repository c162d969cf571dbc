"""A PKI named like Apple's, for tests of the identity checks: a root, WWDR intermediates of
any generation (same common name, generation in the OU, as Apple's), and pass certificates
with the validity a test needs."""

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

WWDR_COMMON_NAME = "Apple Worldwide Developer Relations Certification Authority"
PASS_TYPE_IDENTIFIER = "pass.com.example.tickets"
TEAM_IDENTIFIER = "ABCDE12345"
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    certificate: x509.Certificate
    key: rsa.RSAPrivateKey

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _issue(
    subject: x509.Name,
    issuer: Issued | None,
    *,
    ca: bool,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> Issued:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer_key = issuer.key if issuer else key
    end = not_after or _now() + 365 * _DAY
    start = not_before or min(_now() - 60 * _DAY, end - _DAY)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.certificate.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .sign(signer_key, hashes.SHA256())
    )
    return Issued(certificate, key)


def apple_root() -> Issued:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Apple Inc."),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Apple Certification Authority"),
            x509.NameAttribute(NameOID.COMMON_NAME, "Apple Root CA"),
        ]
    )
    return _issue(name, None, ca=True)


def wwdr(root: Issued, generation: str, *, not_after: datetime.datetime | None = None) -> Issued:
    """Apple's WWDR intermediate of `generation` ("G3", "G4", ...), as Apple names it."""
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, WWDR_COMMON_NAME),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, generation),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Apple Inc."),
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        ]
    )
    return _issue(name, root, ca=True, not_after=not_after)


def pass_certificate(
    issuer: Issued,
    *,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> Issued:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.USER_ID, PASS_TYPE_IDENTIFIER),
            x509.NameAttribute(NameOID.COMMON_NAME, f"Pass Type ID: {PASS_TYPE_IDENTIFIER}"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, TEAM_IDENTIFIER),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example Tickets"),
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        ]
    )
    return _issue(name, issuer, ca=False, not_before=not_before, not_after=not_after)


def identity_env(directory: Path, signer: Issued, intermediate: Issued) -> dict[str, str]:
    """Write the PEM files of an identity; the variables that configure it."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "signer.pem": signer.pem(),
        "signer-key.pem": signer.key_pem(),
        "wwdr.pem": intermediate.pem(),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return {
        "TESSERA_PASS_TYPE_IDENTIFIER": PASS_TYPE_IDENTIFIER,
        "TESSERA_TEAM_IDENTIFIER": TEAM_IDENTIFIER,
        "TESSERA_APPLE_CERTIFICATE_PATH": str(directory / "signer.pem"),
        "TESSERA_APPLE_PRIVATE_KEY_PATH": str(directory / "signer-key.pem"),
        "TESSERA_APPLE_WWDR_CERTIFICATE_PATH": str(directory / "wwdr.pem"),
    }
