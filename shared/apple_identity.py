"""The Apple pass type identity: the issuer signs passes with it, the events service
authenticates to APNs with it (its certificate is also the APNs TLS client certificate).

A pass is signed with a Pass Type ID certificate and carries Apple's WWDR intermediate. For
development, `ensure_dev_identity` creates a local three-level PKI (root CA -> WWDR-like
intermediate -> pass signer) that mirrors Apple's chain, so signatures can be checked with
`openssl cms -verify` against the local root. Real identities come in via `load_identity`
(PEM) or `load_identity_pkcs12` (the .p12 exported from Keychain); `load_apple_identity` picks
one from the settings both services share (`AppleIdentitySettings`).
"""

import datetime
import fcntl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shared.files import write_atomic
from shared.settings import AppleIdentitySettings

ROOT_CERT_FILE = "root-ca.pem"
ROOT_KEY_FILE = "root-ca-key.pem"
WWDR_CERT_FILE = "wwdr.pem"
WWDR_KEY_FILE = "wwdr-key.pem"
SIGNER_CERT_FILE = "signer.pem"
SIGNER_KEY_FILE = "signer-key.pem"
# Every file must exist for a stored identity to count; any gap means "regenerate all". The
# signer key is last because it is written last.
_CA_FILES = (ROOT_CERT_FILE, ROOT_KEY_FILE, WWDR_CERT_FILE, WWDR_KEY_FILE)
_ALL_FILES = (*_CA_FILES, SIGNER_CERT_FILE, SIGNER_KEY_FILE)
_LOCK_FILE = ".lock"
_VALIDITY = datetime.timedelta(days=3650)
# Backdate a little so a freshly made identity is valid on hosts whose clocks lag.
_BACKDATE = datetime.timedelta(days=1)
_DEV_ORG = "Tessera (development)"


@dataclass(frozen=True)
class SigningIdentity:
    certificate: x509.Certificate  # pass type certificate (signer)
    private_key: rsa.RSAPrivateKey
    intermediate: x509.Certificate  # Apple WWDR (or the dev WWDR-like intermediate)
    pass_type_identifier: str  # e.g. "pass.dev.tessera"
    team_identifier: str  # e.g. "TESSERADEV"


def load_identity(
    *,
    certificate_pem: bytes,
    private_key_pem: bytes,
    key_password: bytes | None,
    wwdr_pem: bytes,
    pass_type_identifier: str,
    team_identifier: str,
) -> SigningIdentity:
    """Build an identity from PEM-encoded certificate, private key and WWDR intermediate."""
    certificate = x509.load_pem_x509_certificate(certificate_pem)
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=key_password)
    except TypeError as exc:
        # cryptography signals "password given for an unencrypted key" (and the reverse)
        # with TypeError; callers should only have to handle ValueError.
        raise ValueError(f"cannot load private key: {exc}") from exc
    return _checked_identity(
        certificate=certificate,
        private_key=key,
        intermediate=x509.load_pem_x509_certificate(wwdr_pem),
        pass_type_identifier=pass_type_identifier,
        team_identifier=team_identifier,
    )


def load_identity_pkcs12(
    *,
    p12: bytes,
    password: bytes | None,
    wwdr_pem: bytes,
    pass_type_identifier: str,
    team_identifier: str,
) -> SigningIdentity:
    """Build an identity from a PKCS#12 bundle (certificate + key) and the WWDR intermediate."""
    try:
        key, certificate, _extra = pkcs12.load_key_and_certificates(p12, password)
    except TypeError as exc:
        raise ValueError(f"cannot load PKCS#12 bundle: {exc}") from exc
    if key is None or certificate is None:
        raise ValueError("PKCS#12 bundle must contain both a certificate and its private key")
    return _checked_identity(
        certificate=certificate,
        private_key=key,
        intermediate=x509.load_pem_x509_certificate(wwdr_pem),
        pass_type_identifier=pass_type_identifier,
        team_identifier=team_identifier,
    )


def ensure_dev_identity(
    directory: Path,
    *,
    pass_type_identifier: str = "pass.dev.tessera",  # noqa: S107 - an identifier, not a secret
    team_identifier: str = "TESSERADEV",
) -> SigningIdentity:
    """Load the development identity stored in `directory`, creating it on first use."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # An exclusive lock serialises concurrent first calls: exactly one process generates, the
    # others wait and then load its files instead of overwriting them with a second PKI.
    with open(directory / _LOCK_FILE, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not all((directory / name).is_file() for name in _ALL_FILES):
                _write_identity(directory, pass_type_identifier, team_identifier)
            identity = load_identity(
                certificate_pem=(directory / SIGNER_CERT_FILE).read_bytes(),
                private_key_pem=(directory / SIGNER_KEY_FILE).read_bytes(),
                key_password=None,
                wwdr_pem=(directory / WWDR_CERT_FILE).read_bytes(),
                pass_type_identifier=pass_type_identifier,
                team_identifier=team_identifier,
            )
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return identity


def load_apple_identity(settings: AppleIdentitySettings) -> SigningIdentity:
    """The configured identity, or the development one under `{data_dir}/signing/`."""
    ids = {
        "pass_type_identifier": settings.pass_type_identifier,
        "team_identifier": settings.team_identifier,
    }
    if not settings.apple_configured:
        return ensure_dev_identity(settings.data_dir / "signing", **ids)
    assert settings.apple_wwdr_certificate_path is not None  # enforced by the settings
    wwdr = settings.apple_wwdr_certificate_path.read_bytes()
    password = settings.apple_private_key_password
    secret = password.get_secret_value().encode() if password else None
    if settings.apple_pkcs12_path is not None:
        p12 = settings.apple_pkcs12_path.read_bytes()
        return load_identity_pkcs12(p12=p12, password=secret, wwdr_pem=wwdr, **ids)
    assert settings.apple_certificate_path
    assert settings.apple_private_key_path
    return load_identity(
        certificate_pem=settings.apple_certificate_path.read_bytes(),
        private_key_pem=settings.apple_private_key_path.read_bytes(),
        key_password=secret,
        wwdr_pem=wwdr,
        **ids,
    )


def _checked_identity(
    *,
    certificate: x509.Certificate,
    private_key: object,
    intermediate: x509.Certificate,
    pass_type_identifier: str,
    team_identifier: str,
) -> SigningIdentity:
    if not isinstance(private_key, rsa.RSAPrivateKey):
        raise ValueError(f"pass signing key must be RSA, got {type(private_key).__name__}")
    if not pass_type_identifier or not team_identifier:
        raise ValueError("pass_type_identifier and team_identifier must be non-empty")
    if certificate.public_key() != private_key.public_key():
        raise ValueError("private key does not match the pass type certificate")
    # Wallet rejects a pass whose identifiers differ from the certificate's UID (pass type) and
    # OU (team); catching that here beats a pass that silently fails to install.
    for label, oid, expected in (
        ("UID", NameOID.USER_ID, pass_type_identifier),
        ("OU", NameOID.ORGANIZATIONAL_UNIT_NAME, team_identifier),
    ):
        actual = _name_value(certificate.subject, oid)
        if actual is not None and actual != expected:
            raise ValueError(f"certificate {label} is {actual!r}, expected {expected!r}")
    return SigningIdentity(
        certificate=certificate,
        private_key=private_key,
        intermediate=intermediate,
        pass_type_identifier=pass_type_identifier,
        team_identifier=team_identifier,
    )


def _name_value(name: x509.Name, oid: x509.ObjectIdentifier) -> str | None:
    attributes = name.get_attributes_for_oid(oid)
    if not attributes:
        return None
    value = attributes[0].value
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _write_identity(directory: Path, pass_type_identifier: str, team_identifier: str) -> None:
    now = datetime.datetime.now(datetime.UTC)
    root_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    root_name = _name(x509.NameAttribute(NameOID.COMMON_NAME, "Tessera Dev Root CA"))
    root = _issue(root_name, root_key, root_name, root_key, now, ca_path_length=None)
    wwdr_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    wwdr_name = _name(
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Tessera Dev WWDR"),
        x509.NameAttribute(NameOID.COMMON_NAME, "Tessera Dev WWDR-like Intermediate"),
    )
    wwdr = _issue(wwdr_name, wwdr_key, root_name, root_key, now, ca_path_length=0)
    signer_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer_name = _name(
        x509.NameAttribute(NameOID.USER_ID, pass_type_identifier),
        x509.NameAttribute(NameOID.COMMON_NAME, f"Pass Type ID: {pass_type_identifier}"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, team_identifier),
    )
    signer = _issue(signer_name, signer_key, wwdr_name, wwdr_key, now, ca_path_length=-1)
    outputs = {
        ROOT_CERT_FILE: (_cert_pem(root), 0o644),
        ROOT_KEY_FILE: (_key_pem(root_key), 0o600),
        WWDR_CERT_FILE: (_cert_pem(wwdr), 0o644),
        WWDR_KEY_FILE: (_key_pem(wwdr_key), 0o600),
        SIGNER_CERT_FILE: (_cert_pem(signer), 0o644),
        SIGNER_KEY_FILE: (_key_pem(signer_key), 0o600),
    }
    # Each file is replaced atomically so a crash never leaves a truncated PEM.
    for name in _ALL_FILES:
        data, mode = outputs[name]
        write_atomic(directory / name, data, mode)


def _name(*attributes: x509.NameAttribute[str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, _DEV_ORG), *attributes])


def _issue(
    subject: x509.Name,
    subject_key: rsa.RSAPrivateKey,
    issuer: x509.Name,
    issuer_key: rsa.RSAPrivateKey,
    now: datetime.datetime,
    *,
    ca_path_length: int | None,
) -> x509.Certificate:
    """Issue a certificate; ca_path_length -1 means an end-entity (signer) certificate."""
    is_ca = ca_path_length != -1
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(subject_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(
            x509.BasicConstraints(ca=is_ca, path_length=ca_path_length if is_ca else None),
            critical=True,
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=not is_ca,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=is_ca,
                crl_sign=is_ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(subject_key.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    )
    if not is_ca:
        # Like Apple's pass type certificates, the signer is also the APNs TLS client certificate.
        usages = [ExtendedKeyUsageOID.CODE_SIGNING, ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    encoding, key_format = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, key_format, serialization.NoEncryption())
