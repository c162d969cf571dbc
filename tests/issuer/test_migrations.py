"""Data migrations at the issuer's start, against a real MongoDB-wire store: the
holder_email_key backfill runs until a start completes it, then never again (its query reads
every pass), and deleting its `issuer_migrations` entry runs it once more."""

import asyncio

from pymongo import UpdateOne

from services.issuer.repository import (
    EMAIL_KEYS_MIGRATION,
    LEGACY_EMAIL_INDEX,
    NULL_SYNC_DUE_MIGRATION,
    REDEMPTION_LIMITS_MIGRATION,
    IssuerRepository,
)
from shared.models import email_key
from shared.mongo import count_commands, create_client
from tests.support.database import commands_sent
from tests.support.polling import poll_async
from tests.support.records import pass_record, template_record


async def _legacy_pass(repo: IssuerRepository, pass_id: str, email: str) -> None:
    """A pass as stored before `holder_email_key` existed (only what the backfill reads)."""
    document = {"_id": pass_id, "holder_email": email}
    # The unique keys of a pass, each its own.
    await repo.passes.insert_one(document | {"serial_number": pass_id, "short_id": pass_id})


async def _key_of(repo: IssuerRepository, pass_id: str) -> str | None:
    doc = await repo.passes.find_one({"_id": pass_id})
    assert doc is not None
    return doc.get("holder_email_key")


async def test_the_backfill_runs_until_a_start_completes_it_then_never_again(
    repo: IssuerRepository,
) -> None:
    await _legacy_pass(repo, "pass_old1", "Ada.Lovelace@example.com")
    assert await repo.backfill_email_keys_once() == 1
    assert await _key_of(repo, "pass_old1") == "ada.lovelace@example.com"
    assert await repo.migrations.find_one({"_id": EMAIL_KEYS_MIGRATION}) is not None

    # The next start reads its entry and nothing else.
    await _legacy_pass(repo, "pass_old2", "Grace.Hopper@example.com")
    sent: list[str] = []
    count_commands(lambda command, _: sent.append(command))
    try:
        assert await repo.backfill_email_keys_once() == 0
    finally:
        count_commands(None)
    assert sent == ["find"]
    assert await _key_of(repo, "pass_old2") is None

    # An operator who deletes the entry gets the backfill again at the next start.
    await repo.migrations.delete_one({"_id": EMAIL_KEYS_MIGRATION})
    assert await repo.backfill_email_keys_once() == 1
    assert await _key_of(repo, "pass_old2") == "grace.hopper@example.com"


# What the email-key backfill lists: the passes still without their normalised address.
MISSING_KEY = {"holder_email_key": {"$exists": False}, "holder_email": {"$ne": None}}


async def test_a_backfill_whose_batch_another_replica_wrote_first_goes_on_to_the_rest(
    repo: IssuerRepository, mongo_url: str
) -> None:
    """Two replicas start at once: the one whose first batch changed nothing (the other wrote
    it) went on only if its query found no pass without the key, not because it modified
    nothing; else its start recorded the migration done while the other was still working, and
    should that one die, no later start gave the rest their key.

    The other replica is a second repository on the same database, with a client of its own.
    It reads the same first batch and writes its keys in a transaction that commits only once
    this replica has read that batch and sent its own writes: those wait for the commit (the
    store holds writes to documents an open transaction wrote), then modify nothing."""
    emails = [f"Holder.{n}@Example.com" for n in range(5)]
    for n, email in enumerate(emails):
        await _legacy_pass(repo, f"pass_old{n}", email)
    other_client = create_client(mongo_url)
    other = IssuerRepository(other_client, other_client[repo.db.name])
    try:
        first_batch = await other.passes.find(MISSING_KEY, {"holder_email": 1}).limit(2).to_list()
        async with other_client.start_session() as session:
            await session.start_transaction()
            await other.passes.bulk_write(
                [
                    UpdateOne(
                        {"_id": doc["_id"], "holder_email": doc["holder_email"]},
                        {"$set": {"holder_email_key": email_key(doc["holder_email"])}},
                    )
                    for doc in first_batch
                ],
                session=session,
            )
            with commands_sent() as sent:
                backfill = asyncio.create_task(repo.backfill_email_keys(batch=2))

                async def first_batch_written() -> bool:
                    return "update" in sent

                await poll_async(first_batch_written, message="this replica's first writes")
            await session.commit_transaction()
        assert await backfill == 3  # the other replica wrote two
    finally:
        await other_client.close()
    for n, email in enumerate(emails):
        assert await _key_of(repo, f"pass_old{n}") == email.lower()


async def test_an_index_a_release_retired_is_dropped_at_start(repo: IssuerRepository) -> None:
    """The lone template_id index of passes (every query by template names the account and
    mode, which the compound index serves) and the exact holder_email one (the filter reads
    the normalised copy) are dropped by the next start, and a start without them is fine; the
    compound indexes that serve those filters stay."""
    await repo.passes.create_index("template_id")
    scope = [("account_id", 1), ("mode", 1)]
    await repo.passes.create_index([*scope, ("holder_email", 1), ("_id", -1)])
    await repo.ensure_indexes()
    names = set(await repo.passes.index_information())
    assert "template_id_1" not in names
    assert LEGACY_EMAIL_INDEX not in names
    assert "account_id_1_mode_1_template_id_1__id_-1" in names
    assert "account_id_1_mode_1_holder_email_key_1__id_-1" in names
    sent: list[str] = []
    count_commands(lambda command, _: sent.append(command))
    try:
        await repo.ensure_indexes()  # nothing to drop: no error, and no drop sent
    finally:
        count_commands(None)
    assert "dropIndexes" not in sent


async def test_passes_stored_before_redemption_policies_get_their_templates_limit(
    repo: IssuerRepository,
) -> None:
    """Their objects showed `redemptions_remaining: null` (unlimited) while scans followed the
    type's default: an event ticket is single-use."""
    template = template_record(type="event", redemption=None)
    await repo.templates.insert_one(template.model_dump(by_alias=True))
    old = pass_record(_id="pass_old", template_id=template.id).model_dump(by_alias=True)
    del old["redemption_limit"]
    await repo.passes.insert_one(old)
    assert await repo.backfill_redemption_limits_once() == 1
    stored = await repo.passes.find_one({"_id": "pass_old"})
    assert stored is not None
    assert stored["redemption_limit"] == 1
    assert await repo.migrations.find_one({"_id": REDEMPTION_LIMITS_MIGRATION}) is not None
    assert await repo.backfill_redemption_limits_once() == 0


async def test_null_google_sync_due_is_unset_once_and_new_passes_store_none(
    repo: IssuerRepository,
) -> None:
    """A null put every pass in the sparse index of the Google step's due passes."""
    old = pass_record(_id="pass_null").model_dump(by_alias=True)
    assert old["google_sync_due"] is None  # as stored before 2026-11-28
    await repo.passes.insert_one(old)
    assert await repo.unset_null_sync_due_once() == 1
    stored = await repo.passes.find_one({"_id": "pass_null"})
    assert stored is not None
    assert "google_sync_due" not in stored
    assert await repo.migrations.find_one({"_id": NULL_SYNC_DUE_MIGRATION}) is not None
    assert await repo.unset_null_sync_due_once() == 0
    assert "google_sync_due" not in pass_record(_id="pass_new").to_document()
