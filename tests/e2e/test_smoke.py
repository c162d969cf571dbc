import pytest

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_create_template_and_pass(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        r = client.post(
            "/v1/templates",
            json={
                "name": "Gig",
                "type": "event",
                "apple_style": "eventTicket",
                "design": {
                    "organization_name": "Acme",
                    "description": "Gig ticket",
                    "fields": [{"key": "seat", "label": "Seat", "slot": "primary"}],
                },
            },
        )
        assert r.status_code == 200, r.text
        tmpl = r.json()
        r = client.post(
            "/v1/passes", json={"template_id": tmpl["id"], "field_values": {"seat": "A1"}}
        )
        assert r.status_code == 200, r.text
        p = r.json()
        print(p)
        r = client.get(p["download_url"])
        assert r.status_code == 200, r.text
