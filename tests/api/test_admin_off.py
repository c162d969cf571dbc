"""Without TESSERA_ADMIN_TOKEN, /admin answers 404 and the message says how to turn it on."""

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.api.config import ApiSettings


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/v1/accounts"),
        ("POST", "/admin/v1/accounts"),
        ("DELETE", "/admin/v1/accounts/account_x/api_keys/key_x"),
        ("GET", "/admin"),
    ],
)
def test_the_admin_404_says_the_operator_api_is_off(method: str, path: str) -> None:
    client = TestClient(create_app(ApiSettings(admin_token=None)))
    response = client.request(method, path)
    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("not_found_error", "route_unknown")
    assert "set TESSERA_ADMIN_TOKEN" in error["message"]
    assert path in error["message"]


def test_other_unknown_urls_and_a_token_keep_the_plain_404() -> None:
    off = TestClient(create_app(ApiSettings(admin_token=None)))
    assert "TESSERA_ADMIN_TOKEN" not in off.get("/v1/nothing").json()["error"]["message"]
    assert "TESSERA_ADMIN_TOKEN" not in off.get("/administrator").json()["error"]["message"]
    on = TestClient(create_app(ApiSettings(admin_token="t" * 40)))
    response = on.get("/admin/v1/nothing", headers={"Authorization": "Bearer " + "t" * 40})
    assert response.status_code == 404
    assert "TESSERA_ADMIN_TOKEN" not in response.json()["error"]["message"]
