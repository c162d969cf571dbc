"""An import's rows from CSV (POST /v1/jobs/import_passes, Content-Type: text/csv).

The header row names the columns: `holder_name`, `holder_email`, the template's field keys (or
`field_values.<key>`, which names a field even when its key is `holder_name` or `holder_email`),
and `metadata.<key>`; anything else (or a column named twice) fails the request with 400, before
any job exists. Each record after it is a row, numbered from 1 (blank lines, and records whose
cells are all blank, as spreadsheets export below their data, are skipped and not counted); an
empty cell is an absent value (the field's default applies). A record with more or fewer cells
than the header fails alone. Rows then go through the same checks as JSON rows.
"""

import csv
import io
from typing import Any

from shared.errors import InvalidRequest
from shared.models import RowError
from shared.pass_limits import metadata_problem

# An import of 100,000 rows is far more than the 1 MiB of other requests: the two import
# routes take up to this much (docs/api-decisions.md#jobs).
IMPORT_MAX_BODY_BYTES = 64 * 1024 * 1024
HOLDER_COLUMNS = ("holder_name", "holder_email")
# The csv module refuses a cell over 131,072 characters as an error of the whole file; any
# cell an import's body can hold is read, and one too long fails its row alone.
csv.field_size_limit(max(csv.field_size_limit(), IMPORT_MAX_BODY_BYTES))
METADATA_PREFIX = "metadata."
FIELD_PREFIX = "field_values."


def _header_error(message: str) -> InvalidRequest:
    return InvalidRequest(message, param="header", code="csv_header_invalid")


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")  # a byte order mark, as spreadsheets write, is fine
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"The CSV is not UTF-8 (byte {exc.start} cannot be decoded).", code="csv_invalid"
        ) from exc


def check_header(header: list[str], field_keys: set[str]) -> list[str]:
    """The columns, checked; raises 400 (param `header`) naming the first bad column."""
    columns = [name.strip() for name in header]
    if not any(columns):
        raise _header_error("The CSV needs a header row naming its columns.")
    seen: set[str] = set()
    for name in columns:
        meaning = _meaning(name)
        if meaning in seen:
            raise _header_error(f"The column '{name}' is named twice.")
        seen.add(meaning)
        if name in HOLDER_COLUMNS or name in field_keys:
            continue
        if name.startswith(FIELD_PREFIX) and name.removeprefix(FIELD_PREFIX) in field_keys:
            continue
        if name.startswith(METADATA_PREFIX) and len(name) > len(METADATA_PREFIX):
            _check_metadata_column(name)
            continue
        raise _header_error(
            f"Unknown column '{name}': use holder_name, holder_email, metadata.<key> or a "
            f"field of the template ({', '.join(sorted(field_keys)) or 'it has none'}), as "
            "its key or as field_values.<key>."
        )
    return columns


def _meaning(column: str) -> str:
    """What a column sets: a field named by its key or by `field_values.<key>` is one field
    (a holder column's name stays its own, so a field `holder_name` is told from the holder's)."""
    if column in HOLDER_COLUMNS or column.startswith((FIELD_PREFIX, METADATA_PREFIX)):
        return column
    return FIELD_PREFIX + column


def _check_metadata_column(name: str) -> None:
    """A `metadata.<key>` column whose key no pass can hold fails the request, not each row."""
    key = name.removeprefix(METADATA_PREFIX)
    problem = metadata_problem({key: ""})
    if problem is None and "\x00" in key:
        problem = (name, "keys may not hold a NUL character")
    if problem is not None:
        raise _header_error(f"The column '{name}' names no possible metadata key: {problem[1]}")


def _row(columns: list[str], cells: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    field_values: dict[str, str] = {}
    metadata: dict[str, str] = {}
    for name, cell in zip(columns, cells, strict=True):
        if cell == "":
            continue
        if name in HOLDER_COLUMNS:
            body[name] = cell
        elif name.startswith(FIELD_PREFIX):
            field_values[name.removeprefix(FIELD_PREFIX)] = cell
        elif name.startswith(METADATA_PREFIX):
            metadata[name.removeprefix(METADATA_PREFIX)] = cell
        else:
            field_values[name] = cell
    if field_values:
        body["field_values"] = field_values
    if metadata:
        body["metadata"] = metadata
    return body


def parse_rows(data: bytes, field_keys: set[str], max_rows: int) -> list[dict[str, Any] | RowError]:
    """The rows of a CSV import as row bodies (or the error of a malformed record)."""
    # strict: a quote left open is an error, not a cell that swallows the rest of the file.
    reader = csv.reader(io.StringIO(_text(data), newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise _header_error("The CSV is empty: it needs a header row and at least one row.")
        columns = check_header(header, field_keys)
        rows: list[dict[str, Any] | RowError] = []
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # a blank line, `,,,` or spaces: no row
            if len(rows) >= max_rows:
                raise InvalidRequest(
                    f"An import takes at most {max_rows} rows.",
                    param="rows",
                    code="parameter_too_large",
                )
            if len(cells) != len(columns):
                rows.append(
                    RowError(
                        status=400,
                        type="invalid_request_error",
                        code="csv_row_invalid",
                        message=f"The row has {len(cells)} cells; the header names "
                        f"{len(columns)} columns.",
                    )
                )
                continue
            rows.append(_row(columns, cells))
    except csv.Error as exc:
        raise InvalidRequest(
            f"The CSV cannot be read at line {reader.line_num}: {exc}.", code="csv_invalid"
        ) from exc
    if not rows:
        raise InvalidRequest(
            "The CSV has a header but no rows.", param="rows", code="parameter_missing"
        )
    return rows
