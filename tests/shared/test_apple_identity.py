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

from shared.apple_identity import (
    SigningIdentity,
    ensure_dev_identity,
    load_identity,
    load_identity_pkcs12,
)
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
    eku = signer.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CODE_SIGNING in eku
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
