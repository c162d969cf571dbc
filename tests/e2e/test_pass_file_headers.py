"""Both ways a device gets a pass's .pkpass (the public download and Apple's web service) answer
the same Last-Modified for the same version: they read one PassFileView (issue 11: they used to
disagree, the download sending the file's creation time). Both send the response's Date instead
while the stored stamp is ahead of the clock (issue 15), so they are compared once it is not."""

import httpx2
import pytest

from tests.support.api import ok
from tests.support.apple_wallet import issue_and_download
from tests.support.emulated_iphone import InstalledPass
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _web_service_copy(installed: InstalledPass) -> httpx2.Response:
    url = f"{installed.web_service_url}/v1/passes/{installed.pass_type}/{installed.serial_number}"
    response = httpx2.get(url, headers=installed.authorization, timeout=30.0)
    assert response.status_code == 200
    return response


def _settled_stamp(installed: InstalledPass) -> str:
    """The web service's Last-Modified once the clock has passed the version's stored stamp:
    until then both endpoints send the response's Date instead, never later (issue 15)."""

    def stamp() -> str | None:
        modified = _web_service_copy(installed).headers["last-modified"]
        url = f"{installed.web_service_url}/v1/passes/{installed.pass_type}/"
        since = installed.authorization | {"If-Modified-Since": modified}
        again = httpx2.get(url + installed.serial_number, headers=since, timeout=30.0)
        return modified if again.status_code == 304 else None

    return poll(stamp, timeout=5.0, message="the clock to pass the stored stamp")


def test_the_download_and_the_web_service_agree_on_last_modified(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        pass_, pkpass, _ = issue_and_download(client)
        installed = InstalledPass(pkpass, None)
        stamp = _settled_stamp(installed)
        assert httpx2.get(pass_["download_url"], timeout=30.0).headers["last-modified"] == stamp

        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "1A"}}))
        newer = _settled_stamp(installed)
        again = httpx2.get(pass_["download_url"], timeout=30.0)
        assert again.status_code == 200
        assert again.headers["etag"].endswith('.2"')
        assert again.headers["last-modified"] == newer
        assert newer != stamp
