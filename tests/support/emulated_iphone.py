"""An emulated iPhone: Apple Wallet's side of the pass web service protocol, followed exactly.

Installing a pass reads `webServiceURL`, `authenticationToken`, `passTypeIdentifier` and
`serialNumber` from its pass.json and registers the device with its push token. On a push the
phone asks which serial numbers changed since its last `lastUpdated` tag (no
`passesUpdatedSince` before it has one), then fetches each changed pass with If-Modified-Since
set to the Last-Modified it got with its copy, and keeps what it receives. Removing a pass
unregisters it; `log` posts to /v1/log as Wallet does when something goes wrong.
"""

import io
import json
import secrets
import zipfile
from dataclasses import dataclass
from typing import Any

import httpx2

USER_AGENT = "PassKit/1.0 CFNetwork/1496.0.7 Darwin/23.5.0"


@dataclass
class InstalledPass:
    pkpass: bytes
    last_modified: str | None

    @property
    def pass_json(self) -> dict[str, Any]:
        with zipfile.ZipFile(io.BytesIO(self.pkpass)) as archive:
            document: dict[str, Any] = json.loads(archive.read("pass.json"))
            return document

    @property
    def serial_number(self) -> str:
        return str(self.pass_json["serialNumber"])

    @property
    def pass_type(self) -> str:
        return str(self.pass_json["passTypeIdentifier"])

    @property
    def web_service_url(self) -> str:
        return str(self.pass_json["webServiceURL"])

    @property
    def authorization(self) -> dict[str, str]:
        return {"Authorization": f"ApplePass {self.pass_json['authenticationToken']}"}

    def field(self, key: str) -> dict[str, Any] | None:
        style = next(
            value
            for name, value in self.pass_json.items()
            if isinstance(value, dict) and "primaryFields" in value
        )
        for slot in ("headerFields", "primaryFields", "secondaryFields", "auxiliaryFields"):
            for item in style.get(slot, []):
                if item["key"] == key:
                    found: dict[str, Any] = item
                    return found
        return None


@dataclass(frozen=True)
class Sync:
    """What one push made the phone do."""

    listing_status: int
    serial_numbers: list[str]
    downloads: dict[str, int]  # serial -> status of its GET


class EmulatedIPhone:
    def __init__(self) -> None:
        self.device_library_identifier = secrets.token_hex(16)
        self.push_token = secrets.token_hex(32)
        self.passes: dict[str, InstalledPass] = {}
        self.last_updated: dict[str, str] = {}  # per pass type: the last lastUpdated tag
        self._http = httpx2.Client(timeout=30.0, headers={"User-Agent": USER_AGENT})

    def close(self) -> None:
        self._http.close()

    def _registration_url(self, installed: InstalledPass) -> str:
        return (
            f"{installed.web_service_url}/v1/devices/{self.device_library_identifier}"
            f"/registrations/{installed.pass_type}/{installed.serial_number}"
        )

    def install(self, pkpass: bytes, last_modified: str | None = None) -> int:
        """Add the pass to Wallet and register for its updates; the registration's status."""
        installed = InstalledPass(pkpass, last_modified)
        self.passes[installed.serial_number] = installed
        response = self._http.post(
            self._registration_url(installed),
            json={"pushToken": self.push_token},
            headers=installed.authorization,
        )
        return response.status_code

    def remove(self, serial_number: str) -> int:
        installed = self.passes.pop(serial_number)
        response = self._http.delete(
            self._registration_url(installed), headers=installed.authorization
        )
        return response.status_code

    def on_push(self, pass_type: str) -> Sync:
        """What Wallet does when a push for `pass_type` arrives."""
        any_pass = next(p for p in self.passes.values() if p.pass_type == pass_type)
        params = {}
        if pass_type in self.last_updated:
            params["passesUpdatedSince"] = self.last_updated[pass_type]
        response = self._http.get(
            f"{any_pass.web_service_url}/v1/devices/{self.device_library_identifier}"
            f"/registrations/{pass_type}",
            params=params,
        )
        if response.status_code != 200:
            return Sync(response.status_code, [], {})
        body = response.json()
        self.last_updated[pass_type] = body["lastUpdated"]
        downloads = {
            serial: self.fetch(serial) for serial in body["serialNumbers"] if serial in self.passes
        }
        return Sync(200, body["serialNumbers"], downloads)

    def fetch(self, serial_number: str) -> int:
        """Ask for the latest version of a pass; keep it when it changed (200)."""
        installed = self.passes[serial_number]
        headers = dict(installed.authorization)
        if installed.last_modified is not None:
            headers["If-Modified-Since"] = installed.last_modified
        response = self._http.get(
            f"{installed.web_service_url}/v1/passes/{installed.pass_type}/{serial_number}",
            headers=headers,
        )
        if response.status_code == 200:
            self.passes[serial_number] = InstalledPass(
                response.content, response.headers.get("last-modified")
            )
        return response.status_code

    def log(self, web_service_url: str, messages: list[str]) -> int:
        return self._http.post(f"{web_service_url}/v1/log", json={"logs": messages}).status_code
