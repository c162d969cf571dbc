"""shared/redaction.py: the copies of a pass inside stored answers lose its personal data, and
nothing else changes."""

from typing import Any

from shared.redaction import code_ref, copy_refs, erase_pass_data, is_redaction

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


def test_the_refs_of_a_stored_answer_are_the_ids_a_redaction_looks_for() -> None:
    batch = {"object": "list", "data": [{"pass": _pass()}, {"pass": _pass("pass_2")}]}
    rows = {"rows": [{"record": {"id": "pass_3"}}, {"error": {"type": "invalid_request"}}]}
    named = {"id": "scan_1", "object": "scan", "pass_id": PASS_ID, "code": "C"}
    unnamed = {"id": "scan_2", "object": "scan", "pass_id": None, "code": "C"}

    assert copy_refs(_pass(), "acct") == [PASS_ID]
    assert copy_refs(batch, "acct") == [PASS_ID, "pass_2"]
    assert copy_refs(rows, "acct") == ["pass_3"]
    assert copy_refs({"id": "dlv_1", "data": {"pass": {"id": PASS_ID}}}, None) == ["dlv_1", PASS_ID]
    assert copy_refs(named, "acct") == [PASS_ID, "scan_1"]  # a code read by naming the pass
    assert copy_refs(unnamed, "acct") == sorted(["scan_2", code_ref("acct", "C")])
    assert code_ref("acct", "C") != code_ref("other", "C")
    assert "C" not in code_ref("acct", "C").removeprefix("code:")
    assert copy_refs(["not", "an", "object"], "acct") == []
