"""services/api/scanner_keys.py against the real store: one key per request, however often
the request runs."""

from services.api.accounts import Principal
from services.api.repository import ApiRepository
from services.api.scanner_keys import create_scanner_key
from shared.clock import SystemClock
from shared.ids import new_id
from shared.mongo import Database


async def test_a_retried_request_makes_its_one_key_again_not_a_second(db: Database) -> None:
    """The first run wrote its key and failed before its answer was stored (so the key was
    never shown); the retry with the same Idempotency-Key takes the key over with a new
    secret instead of leaving an unseen, active second key."""
    repo = ApiRepository(db)
    principal = Principal(account_id="acct_1", mode="test", plan="paid", key_id="key_1")
    command_id = new_id("command")
    first = await create_scanner_key(repo, SystemClock(), principal, "North gate", command_id)
    again = await create_scanner_key(repo, SystemClock(), principal, "North gate", command_id)
    assert again.id == first.id
    assert again.key != first.key
    stored = [doc async for doc in db["api_keys"].find({"account_id": "acct_1"})]
    assert len(stored) == 1
    other = await create_scanner_key(
        repo, SystemClock(), principal, "South gate", new_id("command")
    )
    assert other.id != first.id
