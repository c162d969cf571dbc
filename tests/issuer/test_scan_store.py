"""The scans' indexes (services/issuer/scan_store.py): every list filter has one."""

from services.issuer.scan_store import ScanStore
from shared.mongo import Database


async def test_each_scan_list_filter_has_its_index(db: Database) -> None:
    """`GET /v1/scans?result=` walked every scan of the account without its index."""
    await ScanStore(db).ensure_indexes()
    keys = [list(info["key"]) for info in (await db["scans"].index_information()).values()]
    scope = [("account_id", 1), ("mode", 1)]
    for name in ("pass_id", "result"):
        assert [*scope, (name, 1), ("_id", -1)] in keys, name
