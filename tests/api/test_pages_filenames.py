"""Download file names after the organization (services/api/pages/filenames.py)."""

from urllib.parse import unquote

import pytest

from services.api.pages.filenames import attachment
from tests.issuer.pkpass_samples import minimal_design
from tests.support.records import template_record


def _disposition(organization: str) -> str:
    design = {**minimal_design("generic"), "organization_name": organization}
    return attachment(template_record(design=design), "pkpass", "pass")


def test_an_ascii_name_is_its_slug() -> None:
    assert _disposition("Acme Live") == 'attachment; filename="acme-live.pkpass"'


@pytest.mark.parametrize(
    ("organization", "slug", "name"),
    [
        ("Café Müller", "caf-m-ller", "Café Müller"),
        ("東京ドーム", "pass", "東京ドーム"),
        ('Ελληνικά "Θέατρα"/Αθήνα', "pass", "Ελληνικά -Θέατρα-Αθήνα"),
        ("Zürich\u202e\u200b Oper", "z-rich-oper", "Zürich Oper"),
    ],
)
def test_a_name_that_is_not_ascii_is_given_whole_in_filename_star(
    organization: str, slug: str, name: str
) -> None:
    """Every non-ASCII character was dropped: `東京ドーム` downloaded as `pass.pkpass`."""
    plain, encoded = _disposition(organization).split("; filename*=UTF-8''")
    assert plain == f'attachment; filename="{slug}.pkpass"'
    assert encoded.isascii()
    assert unquote(encoded) == f"{name}.pkpass"
