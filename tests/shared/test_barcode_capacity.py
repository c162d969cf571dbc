"""shared/barcode_capacity.py: a message a barcode's format cannot carry is found, with the
barcode it is in; placeholders count at their identifiers' longest, field values as given."""

from shared.barcode_capacity import MAX_MESSAGE_BYTES, barcode_problem
from shared.design import Design


def _design(**barcode: str) -> Design:
    return Design.model_validate(
        {
            "organization_name": "Acme",
            "description": "Ticket",
            "fields": [{"key": "note", "label": "Note", "slot": "back"}],
            "barcode": barcode,
        }
    )


def test_code128_carries_latin_1_only() -> None:
    assert barcode_problem(_design(format="code128", message="Billet n° {short_id}"), {}) is None
    problem = barcode_problem(_design(format="code128", message="Билет {serial_number}"), {})
    assert problem is not None
    assert problem[0] == "barcode"
    assert "Latin-1" in problem[1]


def test_each_format_has_its_capacity_with_the_values_of_the_pass() -> None:
    pdf417 = _design(format="pdf417", message="{field_values.note}")
    assert barcode_problem(pdf417, {"note": "x" * MAX_MESSAGE_BYTES["pdf417"]}) is None
    problem = barcode_problem(pdf417, {"note": "x" * (MAX_MESSAGE_BYTES["pdf417"] + 1)})
    assert problem is not None
    assert problem[0] == "barcode"
    # UTF-8 once Latin-1 cannot carry it: each of these is three bytes.
    qr = _design(format="qr", message="{field_values.note}")
    assert barcode_problem(qr, {"note": "€" * 533}) is None
    assert barcode_problem(qr, {"note": "€" * 534}) is not None
    fixed = _design(format="code128", message="x" * 221 + "{serial_number}")
    assert barcode_problem(fixed, {}) is not None  # 221 + 36 > 256
