"""ErasedBodies (services/webhooks/erased_bodies.py) against a real MongoDB-wire store: each
look finds the deliveries a redaction erased since the last one, and keeps the bodies of those
this replica holds."""

from datetime import UTC, datetime, timedelta

from services.webhooks.erased_bodies import CLOCK_MARGIN, ErasedBodies
from services.webhooks.repository import WebhookRepository
from tests.webhooks.records import delivery


async def test_a_look_finds_the_bodies_erased_since_the_last_and_keeps_the_held_ones(
    repo: WebhookRepository,
) -> None:
    body = '{"data": {"pass": {"id": "pass_x", "holder_name": "Ada"}}}'
    held, other = (delivery(pass_id="pass_x", payload=body) for _ in range(2))
    for record in (held, other):
        await repo.insert_delivery(record)
    moment = datetime.now(UTC)
    erased = ErasedBodies(repo.erased_bodies, lambda: moment)
    await erased.look({held.id})
    assert erased.body_of(held.id) is None  # nothing erased yet

    assert await repo.erase_pass_copies("acct_a", "test", "pass_x", "evt_kept") == 2
    await erased.look({held.id})
    kept = erased.body_of(held.id)
    assert kept is not None
    assert "Ada" not in kept
    assert erased.body_of(other.id) is None  # not held here

    # A later look goes back only the clock margin before the last one.
    moment += CLOCK_MARGIN + timedelta(seconds=1)
    await erased.look({held.id})
    assert erased.body_of(held.id) == kept  # kept while held
    await erased.look(set())
    assert erased.body_of(held.id) is None
