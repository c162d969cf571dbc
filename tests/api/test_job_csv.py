"""An import's CSV read into rows (services/api/job_csv.py)."""

import pytest

from services.api.job_csv import parse_rows
from shared.errors import InvalidRequest


def test_records_whose_cells_are_all_blank_are_no_rows() -> None:
    """Spreadsheets export `,,` below their data: each made a blank pass and took a unit."""
    data = b"holder_name,seat\nAda,A1\n,\n  ,\t\n \nGrace,\n"
    assert parse_rows(data, {"seat"}, 10) == [
        {"holder_name": "Ada", "field_values": {"seat": "A1"}},
        {"holder_name": "Grace"},
    ]


def test_a_cell_past_the_csv_modules_limit_is_read_for_its_row_to_fail_alone() -> None:
    """Over 131,072 characters the csv module failed the whole file (400 csv_invalid)."""
    long = "x" * 140_000
    rows = parse_rows(f"holder_name\nAda\n{long}\n".encode(), set(), 10)
    assert rows == [{"holder_name": "Ada"}, {"holder_name": long}]


def test_a_file_of_blank_records_has_no_rows() -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_rows(b"holder_name,seat\n,\n,,\n", {"seat"}, 10)
    assert refused.value.param == "rows"


def test_a_field_values_column_names_a_field_even_one_keyed_like_a_holder_column() -> None:
    """A template field keyed `holder_name` could not be set from a CSV: the column was the
    holder's. `field_values.<key>` names the field, whatever its key."""
    data = b"holder_name,field_values.holder_name,field_values.seat,gate\nAda,Ada L.,A1,B\n"
    assert parse_rows(data, {"holder_name", "seat", "gate"}, 10) == [
        {
            "holder_name": "Ada",
            "field_values": {"holder_name": "Ada L.", "seat": "A1", "gate": "B"},
        }
    ]


@pytest.mark.parametrize(
    "header",
    [
        b"seat,field_values.seat",
        b"field_values.nope",
        b"field_values.",
        b"holder_email,holder_email",
    ],
)
def test_a_field_named_twice_or_unknown_as_field_values_fails_the_header(header: bytes) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_rows(header + b"\nx,y\n", {"seat"}, 10)
    assert (refused.value.param, refused.value.code) == ("header", "csv_header_invalid")
