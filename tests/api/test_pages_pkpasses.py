"""services/api/pages/pkpasses.py: the .pkpasses zip of a bundle's .pkpass files."""

import io
import zipfile

import pytest

from services.api.pages.pkpasses import MAX_PASSES, fitting, pkpasses_zip


def _files(count: int, size: int = 100) -> list[bytes]:
    return [bytes([n]) * (size + n) for n in range(count)]


def test_each_pass_is_a_stored_top_level_pkpass_entry_in_order() -> None:
    files = _files(3)

    bundle = pkpasses_zip(files)

    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        assert archive.testzip() is None
        infos = archive.infolist()
        assert [info.filename for info in infos] == [
            "pass-1.pkpass",
            "pass-2.pkpass",
            "pass-3.pkpass",
        ]
        # A .pkpass is a zip already: stored as it is, byte for byte.
        assert {info.compress_type for info in infos} == {zipfile.ZIP_STORED}
        assert [archive.read(info) for info in infos] == files


def test_the_same_passes_make_the_same_bytes() -> None:
    assert pkpasses_zip(_files(2)) == pkpasses_zip(_files(2))


@pytest.mark.parametrize("count", [0, MAX_PASSES + 1])
def test_a_bundle_holds_1_to_10_passes(count: int) -> None:
    with pytest.raises(ValueError, match="1 to 10"):
        pkpasses_zip(_files(count))


def test_ten_passes_fit() -> None:
    files = _files(MAX_PASSES)
    assert fitting(files) == files
    with zipfile.ZipFile(io.BytesIO(pkpasses_zip(files))) as archive:
        assert len(archive.namelist()) == MAX_PASSES


def test_passes_past_the_tenth_are_left_out() -> None:
    assert fitting(_files(MAX_PASSES + 2)) == _files(MAX_PASSES)


@pytest.mark.parametrize("max_bytes", [1_000, 2_345, 5_000, 10_000])
def test_the_passes_that_fit_make_a_bundle_within_the_limit(max_bytes: int) -> None:
    files = _files(MAX_PASSES, size=700)

    kept = fitting(files, max_bytes)

    assert kept == files[: len(kept)]
    assert kept, "at least the first pass fits"
    assert len(pkpasses_zip(kept)) <= max_bytes


def test_nothing_fits_when_the_first_pass_is_too_large() -> None:
    assert fitting([b"x" * 2_000], max_bytes=1_000) == []
