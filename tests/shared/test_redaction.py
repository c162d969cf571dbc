"""shared/redaction.py: the copies of a pass inside stored answers lose its personal data, and
nothing else changes."""

from typing import Any

from shared.redaction import erase_pass_data, is_redaction

PASS_ID = "pass_1"


def _pass(pass_id: str = PASS_ID) -> dict[str, Any]:
    return {
        "id": pass_id,
        "holder_email": "ada@example.com",
        "holder_name": "Ada",
        "field_values": {"seat": "A1"},
        "metadata": {"crm": 1},
        "google_save_url": "https://pay.google.com/gp/v/save/jwt",
        "voided": False,
    }


def test_every_copy_of_the_pass_is_erased_and_others_are_left_alone() -> None:
    stored: dict[str, Any] = {
        "object": "batch",
        "data": [{"pass": _pass()}, {"pass": _pass("pass_2")}],
    }
    assert erase_pass_data(stored, PASS_ID)
    erased = stored["data"][0]["pass"]
    assert erased == {
        "id": PASS_ID,
        "holder_email": None,
        "holder_name": None,
        "field_values": {},
        "metadata": {},
        "google_save_url": None,
        "voided": False,
    }
    assert stored["data"][1]["pass"] == _pass("pass_2")
    assert not erase_pass_data(stored, PASS_ID)  # nothing left to erase


def test_a_stored_record_is_found_by_its_store_id() -> None:
    record = {"_id": PASS_ID, "holder_name": "Ada", "scanned_pass": None}
    assert erase_pass_data(record, PASS_ID)
    assert record["holder_name"] is None


def test_only_the_redaction_void_is_a_redaction() -> None:
    assert is_redaction("voided", {"reason": "redacted", "devices_pushed": 0})
    assert not is_redaction("voided", {})
    assert not is_redaction("updated", {"reason": "redacted"})
