"""docs/api-decisions.md lists every error `code` the API sets, and only those (issue 16
acceptance 3). The Google Wallet callback endpoint (services/events) answers Google, not API
clients, and documents its codes in docs/wallet-callbacks.md."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("services/api", "services/issuer", "services/webhooks", "shared")
SET_IN_CODE = re.compile(r'\bcode="([a-z_]+)"')
TABLE_ROW = re.compile(r"^\| `([a-z_]+)` \| (?:\d{3}|4xx) \|", re.MULTILINE)


def _codes_in_code() -> set[str]:
    found: set[str] = set()
    for source in SOURCES:
        for path in (ROOT / source).rglob("*.py"):
            found |= set(SET_IN_CODE.findall(path.read_text()))
    return found


def test_the_code_table_matches_the_code() -> None:
    table = set(TABLE_ROW.findall((ROOT / "docs" / "api-decisions.md").read_text()))
    in_code = _codes_in_code()
    assert in_code - table == set(), "codes the docs do not list"
    assert table - in_code == set(), "codes the docs list that nothing sets"
