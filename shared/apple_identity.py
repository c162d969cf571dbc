"""The Apple pass type identity: the issuer signs passes with it, the events service
authenticates to APNs with it (its certificate is also the APNs TLS client certificate).

A pass is signed with a Pass Type ID certificate and carries Apple's WWDR intermediate. For
development, `ensure_dev_identity` creates a local three-level PKI (root CA -> WWDR-like
intermediate -> pass signer) that mirrors Apple's chain, so signatures can be checked with
`openssl cms -verify` against the local root. Its signer carries what Apple's Pass Type ID
certificates carry (extended key usages TLS client and Apple's pass signing, the pass type
marker), so tools see the same certificate profile as in production. Real identities come in
via `load_identity` (PEM or DER certificates) or `load_identity_pkcs12` (the .p12 exported from
Keychain); `load_apple_identity` picks one from the settings both services share
(`AppleIdentitySettings`). Every identity is checked (shared/apple_certificates.py): a wrong
intermediate or an expired certificate is refused with `SigningIdentityError`.
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

from shared.apple_certificates import (
    EXPIRY_WARNING,
    SigningIdentityError,
    check_certificates,
    name_value,
)
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
# What Apple's Pass Type ID certificates carry besides TLS client authentication: the pass
# signing extended key usage and the marker extension holding the pass type identifier (the
# leaf checks of Apple's Passbook signing policy), and the APNs production marker.
PASS_SIGNING_USAGE = x509.ObjectIdentifier("1.2.840.113635.100.4.14")
PASS_TYPE_MARKER = x509.ObjectIdentifier("1.2.840.113635.100.6.1.16")
APNS_PRODUCTION_MARKER = x509.ObjectIdentifier("1.2.840.113635.100.6.3.2")
_DER_NULL = b"\x05\x00"


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
    """Build an identity from a certificate (PEM or DER), its PEM private key and the WWDR
    intermediate (PEM or DER: Apple's downloads are DER)."""
    certificate = _load_certificate(certificate_pem)
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=key_password)
    except TypeError as exc:
        # cryptography signals "password given for an unencrypted key" (and the reverse)
        # with TypeError; callers should only have to handle ValueError.
        raise ValueError(f"cannot load private key: {exc}") from exc
    except ValueError as exc:
        if key_password is None:
            raise
        # A wrong password usually fails the decryption's padding check ("bad decrypt"), but
        # about one time in 256 the garbage passes it and fails as a malformed key instead.
        raise ValueError(
            "cannot load private key: wrong password (TESSERA_APPLE_PRIVATE_KEY_PASSWORD), or "
            f"not a private key: {exc}"
        ) from exc
    return _checked_identity(
        certificate=certificate,
        private_key=key,
        intermediate=_load_certificate(wwdr_pem),
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
        intermediate=_load_certificate(wwdr_pem),
        pass_type_identifier=pass_type_identifier,
        team_identifier=team_identifier,
    )


def ensure_dev_identity(
    directory: Path,
    *,
    pass_type_identifier: str = "pass.dev.tessera",  # noqa: S107 - an identifier, not a secret
    team_identifier: str = "TESSERADEV",
) -> SigningIdentity:
    """Load the development identity stored in `directory`, creating it on first use, and
    making it anew when one of its certificates is expired or expires within EXPIRY_WARNING:
    nothing trusts it but this host, so replacing it beats warning about it."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # An exclusive lock serialises concurrent first calls: exactly one process generates, the
    # others wait and then load its files instead of overwriting them with a second PKI.
    with open(directory / _LOCK_FILE, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not _dev_identity_current(directory, datetime.datetime.now(datetime.UTC)):
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
    """The configured identity, or the development one under `{data_dir}/signing/`; any problem
    is a SigningIdentityError naming the files it comes from."""
    if not settings.apple_configured:
        directory = settings.data_dir / "signing"
        try:
            return ensure_dev_identity(
                directory,
                pass_type_identifier=settings.pass_type_identifier,
                team_identifier=settings.team_identifier,
            )
        except (ValueError, OSError) as exc:
            message = f"development signing identity in {directory}: {exc}"
            raise SigningIdentityError(message) from exc
    try:
        return _configured_identity(settings)
    except (ValueError, OSError) as exc:
        files = [
            f"{variable}={path}"
            for variable, path in (
                ("TESSERA_APPLE_PKCS12_PATH", settings.apple_pkcs12_path),
                ("TESSERA_APPLE_CERTIFICATE_PATH", settings.apple_certificate_path),
                ("TESSERA_APPLE_PRIVATE_KEY_PATH", settings.apple_private_key_path),
                ("TESSERA_APPLE_WWDR_CERTIFICATE_PATH", settings.apple_wwdr_certificate_path),
            )
            if path is not None
        ]
        message = f"Apple signing identity ({', '.join(files)}): {exc}"
        raise SigningIdentityError(message) from exc


def _configured_identity(settings: AppleIdentitySettings) -> SigningIdentity:
    assert settings.apple_wwdr_certificate_path is not None  # enforced by the settings
    ids = {
        "pass_type_identifier": settings.pass_type_identifier,
        "team_identifier": settings.team_identifier,
    }
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
        raise SigningIdentityError(
            f"pass signing key must be RSA, got {type(private_key).__name__}"
        )
    if not pass_type_identifier or not team_identifier:
        raise SigningIdentityError("pass_type_identifier and team_identifier must be non-empty")
    if certificate.public_key() != private_key.public_key():
        raise SigningIdentityError("private key does not match the pass type certificate")
    # Wallet rejects a pass whose identifiers differ from the certificate's UID (pass type) and
    # OU (team); catching that here beats a pass that silently fails to install.
    for label, oid, expected in (
        ("UID", NameOID.USER_ID, pass_type_identifier),
        ("OU", NameOID.ORGANIZATIONAL_UNIT_NAME, team_identifier),
    ):
        actual = name_value(certificate.subject, oid)
        if actual is not None and actual != expected:
            raise SigningIdentityError(f"certificate {label} is {actual!r}, expected {expected!r}")
    check_certificates(certificate, intermediate, datetime.datetime.now(datetime.UTC))
    return SigningIdentity(
        certificate=certificate,
        private_key=private_key,
        intermediate=intermediate,
        pass_type_identifier=pass_type_identifier,
        team_identifier=team_identifier,
    )


def _load_certificate(data: bytes) -> x509.Certificate:
    if b"-----BEGIN" in data:
        return x509.load_pem_x509_certificate(data)
    return x509.load_der_x509_certificate(data)


def _dev_identity_current(directory: Path, now: datetime.datetime) -> bool:
    """Whether every file of a stored identity exists and each certificate stays valid for
    more than EXPIRY_WARNING."""
    if not all((directory / name).is_file() for name in _ALL_FILES):
        return False
    for name in (ROOT_CERT_FILE, WWDR_CERT_FILE, SIGNER_CERT_FILE):
        certificate = x509.load_pem_x509_certificate((directory / name).read_bytes())
        usable_until = certificate.not_valid_after_utc - EXPIRY_WARNING
        if not certificate.not_valid_before_utc <= now < usable_until:
            return False
    return True


def _write_identity(
    directory: Path,
    pass_type_identifier: str,
    team_identifier: str,
    *,
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = _VALIDITY,
) -> None:
    """Write a new development PKI; `now` and `validity` only differ from the defaults in
    tests, which need certificates near their end."""
    now = now or datetime.datetime.now(datetime.UTC)
    lifetime = (now - _BACKDATE, now + validity)
    root_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    root_name = _name(x509.NameAttribute(NameOID.COMMON_NAME, "Tessera Dev Root CA"))
    root = _issue(root_name, root_key, root_name, root_key, lifetime, ca_path_length=None)
    wwdr_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    wwdr_name = _name(
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Tessera Dev WWDR"),
        x509.NameAttribute(NameOID.COMMON_NAME, "Tessera Dev WWDR-like Intermediate"),
    )
    wwdr = _issue(wwdr_name, wwdr_key, root_name, root_key, lifetime, ca_path_length=0)
    signer_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer_name = _name(
        x509.NameAttribute(NameOID.USER_ID, pass_type_identifier),
        x509.NameAttribute(NameOID.COMMON_NAME, f"Pass Type ID: {pass_type_identifier}"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, team_identifier),
    )
    signer = _issue(
        signer_name,
        signer_key,
        wwdr_name,
        wwdr_key,
        lifetime,
        ca_path_length=-1,
        pass_type_identifier=pass_type_identifier,
    )
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
    lifetime: tuple[datetime.datetime, datetime.datetime],
    *,
    ca_path_length: int | None,
    pass_type_identifier: str = "",
) -> x509.Certificate:
    """Issue a certificate; ca_path_length -1 means an end-entity (signer) certificate, which
    gets the extensions of a Pass Type ID certificate for `pass_type_identifier`."""
    is_ca = ca_path_length != -1
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(subject_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(lifetime[0])
        .not_valid_after(lifetime[1])
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
        # As in Apple's Pass Type ID certificates, which are also the APNs TLS client
        # certificate. No S/MIME usage: hence `-purpose any` for `openssl cms -verify`, on
        # these passes as on real ones (README, "Signing passes").
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH, PASS_SIGNING_USAGE]
        marker = _der_utf8_string(pass_type_identifier)
        builder = (
            builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.UnrecognizedExtension(PASS_TYPE_MARKER, marker), critical=False)
            .add_extension(
                x509.UnrecognizedExtension(APNS_PRODUCTION_MARKER, _DER_NULL), critical=False
            )
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _der_utf8_string(text: str) -> bytes:
    data = text.encode()
    size = len(data)
    if size < 0x80:
        return b"\x0c" + bytes([size]) + data
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return b"\x0c" + bytes([0x80 | len(length)]) + length + data


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    encoding, key_format = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, key_format, serialization.NoEncryption())
