"""Both ways a device gets a pass's .pkpass (the public download and Apple's web service) answer
the same Last-Modified for the same version: they read one PassFileView (issue 11: they used to
disagree, the download sending the file's creation time)."""

import httpx2
import pytest

from tests.support.api import ok
from tests.support.apple_wallet import issue_and_download
from tests.support.emulated_iphone import InstalledPass
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _web_service_copy(installed: InstalledPass) -> httpx2.Response:
    url = f"{installed.web_service_url}/v1/passes/{installed.pass_type}/{installed.serial_number}"
    response = httpx2.get(url, headers=installed.authorization, timeout=30.0)
    assert response.status_code == 200
    return response


def test_the_download_and_the_web_service_agree_on_last_modified(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        pass_, pkpass, downloaded_stamp = issue_and_download(client)
        installed = InstalledPass(pkpass, downloaded_stamp)
        assert downloaded_stamp == _web_service_copy(installed).headers["last-modified"]

        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "1A"}}))
        again = httpx2.get(pass_["download_url"], timeout=30.0)
        assert again.status_code == 200
        assert again.headers["etag"].endswith('.2"')
        newer = _web_service_copy(installed).headers["last-modified"]
        assert again.headers["last-modified"] == newer
        assert newer != downloaded_stamp
