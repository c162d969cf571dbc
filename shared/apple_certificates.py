"""What makes the certificates of an Apple signing identity usable: the pass certificate was
issued by the intermediate given with it (Apple's WWDR, of the generation that issued it), and
both are valid now. Wallet and `openssl cms -verify` reject every pass signed otherwise, so the
services refuse such an identity at start, and warn before one of its certificates expires
(docs/operations.md#signing-identity).

Apple's WWDR intermediates of generations G1, G3, G4, G5 share one common name; only the OU
(`G3`, `G4`, ...; G1's is "Apple Worldwide Developer Relations") tells them apart, so names are
shown with their OU.
"""

import datetime
import math
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

APPLE_CA_PAGE = "https://www.apple.com/certificateauthority/"
# How long before a certificate expires the services start warning about it.
EXPIRY_WARNING = datetime.timedelta(days=30)
PASS_CERTIFICATE = "pass certificate"  # noqa: S105 - a label, not a secret
INTERMEDIATE = "WWDR intermediate"
_RENEW = {
    PASS_CERTIFICATE: "create a new certificate for the Pass Type ID in the Apple Developer "
    "account (Certificates, Identifiers & Profiles) and configure it",
    INTERMEDIATE: f"download the current one from {APPLE_CA_PAGE}",
}
_WWDR_CN = "Apple Worldwide Developer Relations"
_G1_OU = "Apple Worldwide Developer Relations"


class SigningIdentityError(ValueError):
    """An identity whose passes would not verify; the message names the problem."""


@dataclass(frozen=True)
class Expiry:
    """When one certificate of an identity stops being valid."""

    role: str  # PASS_CERTIFICATE or INTERMEDIATE
    name: str  # its subject, as `describe` shows it
    not_before: datetime.datetime
    not_after: datetime.datetime

    def problem(self, now: datetime.datetime) -> str | None:
        """Why the certificate is unusable at `now`, or None while it is valid."""
        if now < self.not_before:
            return (
                f"the {self.role} {self.name} is not valid before {_when(self.not_before)}: "
                "check the host's clock"
            )
        if now > self.not_after:
            return (
                f"the {self.role} {self.name} expired on {_when(self.not_after)}: "
                + _RENEW[self.role]
            )
        return None

    def warning(self, now: datetime.datetime, within: datetime.timedelta) -> str | None:
        """A notice while the certificate is valid but expires within `within` of `now`."""
        left = self.not_after - now
        if self.problem(now) is not None or left > within:
            return None
        days = max(1, math.ceil(left / datetime.timedelta(days=1)))
        return (
            f"the {self.role} {self.name} expires on {_when(self.not_after)}, "
            f"in {days} day{'s' if days > 1 else ''}: {_RENEW[self.role]}"
        )


def expiries(certificate: x509.Certificate, intermediate: x509.Certificate) -> list[Expiry]:
    return [
        Expiry(
            role,
            describe(cert.subject),
            cert.not_valid_before_utc,
            cert.not_valid_after_utc,
        )
        for role, cert in ((PASS_CERTIFICATE, certificate), (INTERMEDIATE, intermediate))
    ]


def check_certificates(
    certificate: x509.Certificate, intermediate: x509.Certificate, now: datetime.datetime
) -> None:
    """Raise SigningIdentityError naming every problem: a wrong intermediate, an expired or
    not yet valid certificate."""
    problems = [issuer_problem(certificate, intermediate)]
    problems += [expiry.problem(now) for expiry in expiries(certificate, intermediate)]
    found = [problem for problem in problems if problem is not None]
    if found:
        raise SigningIdentityError("; ".join(found))


def issuer_problem(certificate: x509.Certificate, intermediate: x509.Certificate) -> str | None:
    """Why `intermediate` did not issue `certificate`, by name and by signature, or None."""
    wanted, given = certificate.issuer, intermediate.subject
    if wanted == given:
        try:
            certificate.verify_directly_issued_by(intermediate)
        except (InvalidSignature, ValueError, TypeError):
            return (
                f"the intermediate certificate has the name of the pass certificate's issuer, "
                f"{describe(wanted)}, but its key did not sign the pass certificate: it is "
                "another certificate of that name; give the one that issued the pass certificate"
            )
        return None
    message = (
        f"the pass certificate was issued by {describe(wanted)}, but the intermediate "
        f"certificate given with it is {describe(given)}"
    )
    have, need = wwdr_generation(given), wwdr_generation(wanted)
    if need is None:
        return message + ": give the certificate that issued the pass certificate"
    advice = f"this pass certificate was issued by WWDR {need} ({_download(need)})"
    if have is not None:
        return f"{message}: this is WWDR {have}; {advice}"
    return f"{message}: {advice}"


def wwdr_generation(name: x509.Name) -> str | None:
    """ "G4" for Apple's WWDR G4 intermediate (and so on), None for any other name."""
    common_name = name_value(name, NameOID.COMMON_NAME) or ""
    if name_value(name, NameOID.ORGANIZATION_NAME) != "Apple Inc." or not common_name.startswith(
        _WWDR_CN
    ):
        return None
    unit = name_value(name, NameOID.ORGANIZATIONAL_UNIT_NAME) or ""
    if re.fullmatch(r"G\d+", unit):
        return unit
    # G2 (and G6) say it in the common name: "Apple Worldwide Developer Relations CA - G2".
    in_name = re.search(r"- (G\d+)$", common_name)
    if in_name:
        return in_name.group(1)
    return "G1" if unit == _G1_OU else None


def describe(name: x509.Name) -> str:
    """A certificate name as people compare them: its common name and its OU."""
    common_name = name_value(name, NameOID.COMMON_NAME)
    if common_name is None:
        return f"'{name.rfc4514_string()}'"
    unit = name_value(name, NameOID.ORGANIZATIONAL_UNIT_NAME)
    return f"'{common_name}'" + (f" (OU={unit})" if unit else "")


def _download(generation: str) -> str:
    if generation == "G1":
        return f"download it from {APPLE_CA_PAGE}"
    return f"download AppleWWDRCA{generation}.cer from {APPLE_CA_PAGE}"


def name_value(name: x509.Name, oid: x509.ObjectIdentifier) -> str | None:
    attributes = name.get_attributes_for_oid(oid)
    if not attributes:
        return None
    value = attributes[0].value
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _when(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
