"""The Apple identity both services load: the development PKI and real ones (PEM, PKCS#12)."""

import datetime
import stat
from pathlib import Path
from typing import TypedDict

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shared.apple_certificates import (
    EXPIRY_WARNING,
    SigningIdentityError,
    expiries,
    wwdr_generation,
)
from shared.apple_identity import (
    APNS_PRODUCTION_MARKER,
    PASS_SIGNING_USAGE,
    PASS_TYPE_MARKER,
    SigningIdentity,
    _write_identity,
    ensure_dev_identity,
    load_identity,
    load_identity_pkcs12,
)
from tests.support import apple_pki
from tests.support.concurrent_runs import outputs_of_concurrent_runs


class _Pem(TypedDict):
    certificate_pem: bytes
    private_key_pem: bytes
    wwdr_pem: bytes


class _Ids(TypedDict):
    pass_type_identifier: str
    team_identifier: str


def _pem(identity: SigningIdentity, password: bytes | None = None) -> _Pem:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return {
        "certificate_pem": identity.certificate.public_bytes(serialization.Encoding.PEM),
        "private_key_pem": identity.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        ),
        "wwdr_pem": identity.intermediate.public_bytes(serialization.Encoding.PEM),
    }


def _ids() -> _Ids:
    return {"pass_type_identifier": "pass.dev.tessera", "team_identifier": "TESSERADEV"}


def test_dev_identity_files_chain_and_modes(tmp_path: Path) -> None:
    directory = tmp_path / "nested" / "signing"
    identity = ensure_dev_identity(directory)

    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for key_file in ("signer-key.pem", "wwdr-key.pem", "root-ca-key.pem"):
        assert stat.S_IMODE((directory / key_file).stat().st_mode) == 0o600
    root = x509.load_pem_x509_certificate((directory / "root-ca.pem").read_bytes())
    wwdr = x509.load_pem_x509_certificate((directory / "wwdr.pem").read_bytes())
    assert wwdr == identity.intermediate
    root.verify_directly_issued_by(root)
    wwdr.verify_directly_issued_by(root)
    identity.certificate.verify_directly_issued_by(wwdr)

    root_bc = root.extensions.get_extension_for_class(x509.BasicConstraints).value
    wwdr_bc = wwdr.extensions.get_extension_for_class(x509.BasicConstraints).value
    signer_bc = identity.certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert root_bc.ca
    assert wwdr_bc.ca
    assert wwdr_bc.path_length == 0
    assert not signer_bc.value.ca

    signer = identity.certificate
    subject = signer.subject
    assert subject.get_attributes_for_oid(NameOID.USER_ID)[0].value == "pass.dev.tessera"
    assert subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == (
        "TESSERADEV"
    )
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        "Pass Type ID: pass.dev.tessera"
    )
    assert signer.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature
    # What Apple's Pass Type ID certificates carry: TLS client and pass signing usages (no
    # S/MIME usage, hence `-purpose any` for openssl), the pass type and APNs markers.
    eku = signer.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH, PASS_SIGNING_USAGE]
    marker = signer.extensions.get_extension_for_oid(PASS_TYPE_MARKER).value
    assert isinstance(marker, x509.UnrecognizedExtension)
    assert marker.value == b"\x0c\x10pass.dev.tessera"  # UTF8String
    assert signer.extensions.get_extension_for_oid(APNS_PRODUCTION_MARKER)
    lifetime = signer.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert lifetime > datetime.timedelta(days=3640)
    assert identity.private_key.key_size == 2048

    key_pem = (directory / "signer-key.pem").read_bytes()
    assert key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # unencrypted PKCS#8


def test_dev_identity_is_reused(tmp_path: Path) -> None:
    first = ensure_dev_identity(tmp_path)
    second = ensure_dev_identity(tmp_path)

    assert second.certificate == first.certificate
    assert second.intermediate == first.intermediate
    assert second.private_key.public_key() == first.private_key.public_key()


def test_dev_identity_regenerated_when_files_are_missing(tmp_path: Path) -> None:
    first = ensure_dev_identity(tmp_path)
    (tmp_path / "signer-key.pem").unlink()

    second = ensure_dev_identity(tmp_path)

    assert second.certificate != first.certificate
    assert second.intermediate != first.intermediate


def test_dev_identity_concurrent_first_calls_agree(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    script = (
        "import sys; from pathlib import Path\n"
        "from cryptography.hazmat.primitives import hashes\n"
        "from shared.apple_identity import ensure_dev_identity\n"
        "identity = ensure_dev_identity(Path(sys.argv[1]))\n"
        "print(identity.certificate.fingerprint(hashes.SHA256()).hex())\n"
    )
    fingerprints = outputs_of_concurrent_runs(script, str(directory))
    final = ensure_dev_identity(directory).certificate.fingerprint(hashes.SHA256()).hex()
    assert fingerprints == {final}
    assert not list(directory.glob("*.tmp"))


def test_dev_identity_for_another_pass_type_is_refused(tmp_path: Path) -> None:
    ensure_dev_identity(tmp_path)

    with pytest.raises(ValueError, match="UID"):
        ensure_dev_identity(tmp_path, pass_type_identifier="pass.dev.other")


@pytest.mark.parametrize("password", [None, b"s3cret"])
def test_load_identity_round_trip(tmp_path: Path, password: bytes | None) -> None:
    original = ensure_dev_identity(tmp_path)

    loaded = load_identity(**_pem(original, password), key_password=password, **_ids())

    assert loaded.certificate == original.certificate
    assert loaded.intermediate == original.intermediate
    assert loaded.private_key.public_key() == original.private_key.public_key()
    assert (loaded.pass_type_identifier, loaded.team_identifier) == (
        "pass.dev.tessera",
        "TESSERADEV",
    )


@pytest.mark.parametrize("password", [None, b"p12-pass"])
def test_load_identity_pkcs12_round_trip(tmp_path: Path, password: bytes | None) -> None:
    original = ensure_dev_identity(tmp_path)
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    p12 = pkcs12.serialize_key_and_certificates(
        b"tessera", original.private_key, original.certificate, None, encryption
    )
    wwdr_pem = original.intermediate.public_bytes(serialization.Encoding.PEM)

    loaded = load_identity_pkcs12(p12=p12, password=password, wwdr_pem=wwdr_pem, **_ids())

    assert loaded.certificate == original.certificate
    assert loaded.intermediate == original.intermediate
    assert loaded.private_key.public_key() == original.private_key.public_key()


def test_load_identity_rejects_mismatched_key(tmp_path: Path) -> None:
    pem = _pem(ensure_dev_identity(tmp_path / "a"))
    pem["private_key_pem"] = _pem(ensure_dev_identity(tmp_path / "b"))["private_key_pem"]

    with pytest.raises(ValueError, match="does not match"):
        load_identity(**pem, key_password=None, **_ids())


def test_a_wrong_password_is_named_whatever_the_decryption_makes_of_the_key(
    tmp_path: Path,
) -> None:
    """About one wrong password in 256 decrypts to garbage that passes the padding check and
    fails as a malformed key: the message still names the password."""
    pem = _pem(ensure_dev_identity(tmp_path), b"right")
    for attempt in range(600):  # more than enough to meet the 1-in-256 case
        with pytest.raises(ValueError, match=r"(?i)password"):
            load_identity(**pem, key_password=f"wrong-{attempt}".encode(), **_ids())


def test_load_identity_rejects_wrong_password(tmp_path: Path) -> None:
    pem = _pem(ensure_dev_identity(tmp_path), b"right")

    with pytest.raises(ValueError, match=r"(?i)password"):
        load_identity(**pem, key_password=b"wrong", **_ids())
    with pytest.raises(ValueError, match=r"(?i)password"):
        load_identity(**pem, key_password=None, **_ids())


def test_load_identity_pkcs12_rejects_wrong_password(tmp_path: Path) -> None:
    original = ensure_dev_identity(tmp_path)
    p12 = pkcs12.serialize_key_and_certificates(
        b"tessera",
        original.private_key,
        original.certificate,
        None,
        serialization.BestAvailableEncryption(b"right"),
    )
    wwdr_pem = original.intermediate.public_bytes(serialization.Encoding.PEM)

    with pytest.raises(ValueError, match=r"(?i)password"):
        load_identity_pkcs12(p12=p12, password=b"wrong", wwdr_pem=wwdr_pem, **_ids())


def test_load_identity_rejects_non_rsa_key(tmp_path: Path) -> None:
    wwdr_pem = _pem(ensure_dev_identity(tmp_path))["wwdr_pem"]
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ec signer")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )

    with pytest.raises(ValueError, match="RSA"):
        load_identity(
            certificate_pem=certificate.public_bytes(serialization.Encoding.PEM),
            private_key_pem=key_pem,
            key_password=None,
            wwdr_pem=wwdr_pem,
            **_ids(),
        )


def test_load_identity_rejects_other_team(tmp_path: Path) -> None:
    pem = _pem(ensure_dev_identity(tmp_path))

    with pytest.raises(ValueError, match="OU"):
        load_identity(
            **pem,
            key_password=None,
            pass_type_identifier="pass.dev.tessera",
            team_identifier="OTHERTEAM",
        )


def _apple_ids() -> _Ids:
    return {
        "pass_type_identifier": apple_pki.PASS_TYPE_IDENTIFIER,
        "team_identifier": apple_pki.TEAM_IDENTIFIER,
    }


def _load_apple(signer: apple_pki.Issued, wwdr_pem: bytes) -> SigningIdentity:
    return load_identity(
        certificate_pem=signer.pem(),
        private_key_pem=signer.key_pem(),
        key_password=None,
        wwdr_pem=wwdr_pem,
        **_apple_ids(),
    )


@pytest.fixture(scope="module")
def apple_root() -> apple_pki.Issued:
    return apple_pki.apple_root()


@pytest.fixture(scope="module")
def g4(apple_root: apple_pki.Issued) -> apple_pki.Issued:
    return apple_pki.wwdr(apple_root, "G4")


def test_an_apple_chain_loads_with_the_wwdr_as_pem_or_der(g4: apple_pki.Issued) -> None:
    signer = apple_pki.pass_certificate(g4)
    # Apple's download (AppleWWDRCAG4.cer) is DER; a converted PEM works too.
    for wwdr_file in (g4.pem(), g4.der()):
        assert _load_apple(signer, wwdr_file).intermediate == g4.certificate


def test_wwdr_g3_given_for_a_g4_pass_certificate_is_refused_naming_both(
    apple_root: apple_pki.Issued, g4: apple_pki.Issued
) -> None:
    g3 = apple_pki.wwdr(apple_root, "G3")
    signer = apple_pki.pass_certificate(g4)

    with pytest.raises(SigningIdentityError) as refused:
        _load_apple(signer, g3.pem())

    name = apple_pki.WWDR_COMMON_NAME
    assert str(refused.value) == (
        f"the pass certificate was issued by '{name}' (OU=G4), but the intermediate "
        f"certificate given with it is '{name}' (OU=G3): this is WWDR G3; this pass "
        "certificate was issued by WWDR G4 (download AppleWWDRCAG4.cer from "
        "https://www.apple.com/certificateauthority/)"
    )


def test_an_intermediate_of_the_right_name_but_another_key_is_refused(
    g4: apple_pki.Issued,
) -> None:
    impostor = apple_pki.wwdr(apple_pki.apple_root(), "G4")
    signer = apple_pki.pass_certificate(g4)

    with pytest.raises(SigningIdentityError, match="its key did not sign the pass certificate"):
        _load_apple(signer, impostor.pem())


def test_two_development_identities_cannot_be_mixed(tmp_path: Path) -> None:
    """Every development intermediate has the same name: only the signature tells them apart."""
    pem = _pem(ensure_dev_identity(tmp_path / "a"))
    pem["wwdr_pem"] = _pem(ensure_dev_identity(tmp_path / "b"))["wwdr_pem"]

    with pytest.raises(SigningIdentityError, match="its key did not sign"):
        load_identity(**pem, key_password=None, **_ids())


def test_an_expired_pass_certificate_is_refused(g4: apple_pki.Issued) -> None:
    ended = datetime.datetime(2025, 3, 1, 12, 0, tzinfo=datetime.UTC)
    signer = apple_pki.pass_certificate(
        g4, not_before=ended - datetime.timedelta(days=395), not_after=ended
    )

    with pytest.raises(SigningIdentityError) as refused:
        _load_apple(signer, g4.pem())

    assert str(refused.value).startswith(
        f"the pass certificate 'Pass Type ID: {apple_pki.PASS_TYPE_IDENTIFIER}' "
        f"(OU={apple_pki.TEAM_IDENTIFIER}) expired on 2025-03-01 12:00 UTC: create a new "
        "certificate for the Pass Type ID"
    )


def test_an_expired_intermediate_is_refused(apple_root: apple_pki.Issued) -> None:
    # Apple's first WWDR intermediate ended on 2023-02-07; certificates it issued outlived it.
    now = datetime.datetime.now(datetime.UTC)
    old = apple_pki.wwdr(apple_root, "G4", not_after=now - datetime.timedelta(days=1))
    signer = apple_pki.pass_certificate(old)

    with pytest.raises(SigningIdentityError, match=r"the WWDR intermediate .* expired on"):
        _load_apple(signer, old.pem())


def test_a_pass_certificate_not_yet_valid_is_refused(g4: apple_pki.Issued) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)
    signer = apple_pki.pass_certificate(g4, not_before=later)

    with pytest.raises(SigningIdentityError, match=r"is not valid before .*check the host's clock"):
        _load_apple(signer, g4.pem())


def test_a_certificate_expiring_within_30_days_loads_with_a_warning(g4: apple_pki.Issued) -> None:
    now = datetime.datetime.now(datetime.UTC)
    signer = apple_pki.pass_certificate(g4, not_after=now + datetime.timedelta(days=10))

    identity = _load_apple(signer, g4.pem())

    pass_expiry, wwdr_expiry = expiries(identity.certificate, identity.intermediate)
    warning = pass_expiry.warning(now, EXPIRY_WARNING)
    assert warning is not None
    assert "the pass certificate 'Pass Type ID: pass.com.example.tickets'" in warning
    assert f"expires on {signer.certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC" in warning
    assert "in 10 days" in warning
    assert wwdr_expiry.warning(now, EXPIRY_WARNING) is None  # a year left


@pytest.mark.parametrize(
    ("common_name", "unit", "generation"),
    [
        ("Apple Worldwide Developer Relations Certification Authority", "G4", "G4"),
        ("Apple Worldwide Developer Relations Certification Authority", "G3", "G3"),
        (
            "Apple Worldwide Developer Relations Certification Authority",
            "Apple Worldwide Developer Relations",
            "G1",
        ),
        ("Apple Worldwide Developer Relations CA - G2", "Apple Certification Authority", "G2"),
        ("Tessera Dev WWDR-like Intermediate", "Tessera Dev WWDR", None),
    ],
)
def test_wwdr_generations_are_told_apart(
    common_name: str, unit: str, generation: str | None
) -> None:
    organization = "Apple Inc." if common_name.startswith("Apple") else "Tessera"
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
        ]
    )
    assert wwdr_generation(name) == generation


def test_a_development_identity_near_its_end_is_made_anew(tmp_path: Path) -> None:
    _write_identity(
        tmp_path, "pass.dev.tessera", "TESSERADEV", validity=datetime.timedelta(days=20)
    )
    ending = x509.load_pem_x509_certificate((tmp_path / "signer.pem").read_bytes())

    renewed = ensure_dev_identity(tmp_path)

    assert renewed.certificate != ending
    lifetime = renewed.certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert lifetime > datetime.timedelta(days=3640)
    root = x509.load_pem_x509_certificate((tmp_path / "root-ca.pem").read_bytes())
    renewed.intermediate.verify_directly_issued_by(root)


def test_a_development_identity_with_time_left_is_kept(tmp_path: Path) -> None:
    _write_identity(
        tmp_path, "pass.dev.tessera", "TESSERADEV", validity=datetime.timedelta(days=40)
    )
    stored = x509.load_pem_x509_certificate((tmp_path / "signer.pem").read_bytes())

    assert ensure_dev_identity(tmp_path).certificate == stored
