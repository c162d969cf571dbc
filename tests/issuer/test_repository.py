"""Stored pass files: the Last-Modified (whole seconds, strictly later for every version), and
the two parts a pass file is stored in."""

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import bson
import pytest

from services.issuer.pkpass import SignedPass, sign_pass
from services.issuer.reads import IssuerReads
from services.issuer.repository import IssuerRepository, PassFile, last_modified_after
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.design import Design
from shared.mongo import create_client
from tests.issuer.pkpass_samples import b64, design_for, noisy_png, rich_design
from tests.issuer.pkpass_samples import content as sample_content

STAMP = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_last_modified_rounds_up_to_the_second() -> None:
    moment = datetime(2031, 1, 2, 3, 4, 5, 1000, tzinfo=UTC)
    assert last_modified_after(moment, None) == datetime(2031, 1, 2, 3, 4, 6, tzinfo=UTC)
    whole = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert last_modified_after(whole, None) == whole


def test_versions_within_one_second_still_get_later_stamps() -> None:
    first = last_modified_after(datetime(2031, 1, 2, 3, 4, 5, 100_000, tzinfo=UTC), None)
    second = last_modified_after(datetime(2031, 1, 2, 3, 4, 5, 900_000, tzinfo=UTC), first)
    third = last_modified_after(datetime(2031, 1, 2, 3, 4, 5, 950_000, tzinfo=UTC), second)
    assert [first.second, second.second, third.second] == [6, 7, 8]
    later = last_modified_after(datetime(2031, 1, 2, 3, 5, 0, tzinfo=UTC), third)
    assert later == datetime(2031, 1, 2, 3, 5, 0, tzinfo=UTC)


# Pass files in two parts: what is the pass's own in `pass_files`, the images and strings files
# once per template version in `template_assets`; IssuerReads zips them together.


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> SigningIdentity:
    return ensure_dev_identity(tmp_path_factory.mktemp("signing"))


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[IssuerRepository]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    try:
        yield IssuerRepository(client, db)
    finally:
        await client.drop_database(db.name)
        await client.close()


def _pass_file(signed: SignedPass, version: int = 1) -> PassFile:
    return PassFile(
        version=version,
        pass_json=signed.pass_json,
        manifest=signed.manifest,
        signature=signed.signature,
        assets_id=signed.assets.id,
        pass_type_identifier="pass.test",
        last_modified=STAMP,
    )


async def _store(repo: IssuerRepository, pass_id: str, signed: SignedPass) -> None:
    await repo.store_assets(signed.assets.id, signed.assets.files, STAMP)
    async with repo.unit_of_work() as uow:
        await uow.store_pass_file(pass_id, _pass_file(signed), STAMP)


async def test_passes_of_one_template_store_its_images_once(
    repo: IssuerRepository, identity: SigningIdentity
) -> None:
    # Every image at every scale, localized, and a strip of photo-like (incompressible) pixels.
    data = rich_design("eventTicket")
    data["images"]["strip"] = {"x1": b64(noisy_png(375, 144)), "x2": b64(noisy_png(750, 288))}
    design = Design.model_validate(data)
    signed = [
        sign_pass(
            sample_content(design, apple_style="eventTicket", serial_number=f"SER-{n}"), identity
        )
        for n in (1, 2)
    ]
    for number, one in enumerate(signed, start=1):
        await _store(repo, f"pass_{number}", one)
    reads = IssuerReads(repo.db)

    for number, one in enumerate(signed, start=1):
        stored = await reads.pass_file(f"pass_{number}")
        assert stored is not None
        assert stored.data == one.zip()
        assert stored.version == 1
        assert stored.pass_type_identifier == "pass.test"
        meta = await reads.pass_file_meta(f"pass_{number}")
        assert meta is not None
        assert not hasattr(meta, "data")
        assert (meta.version, meta.last_modified) == (1, stored.last_modified)
    # The images are stored once; each pass file holds a few KB of its own.
    images_bytes = signed[0].assets.size
    assert images_bytes > 700_000
    assert await repo.template_assets.count_documents({}) == 1
    async for doc in repo.pass_files.find():
        assert len(bson.encode(doc)) < 8_000
    [assets] = await repo.template_assets.find().to_list()
    assert len(bson.encode(assets)) > images_bytes


async def test_assets_are_stored_once_by_any_repository(
    repo: IssuerRepository, identity: SigningIdentity
) -> None:
    signed = sign_pass(sample_content(design_for("generic", "rich")), identity)
    other = IssuerRepository(repo._client, repo.db)  # another issuer replica

    for repository in (repo, repo, other):
        await repository.store_assets(signed.assets.id, signed.assets.files, STAMP)

    assert await repo.template_assets.count_documents({}) == 1


async def test_a_pass_file_whose_assets_are_missing_is_not_served(
    repo: IssuerRepository, identity: SigningIdentity
) -> None:
    signed = sign_pass(sample_content(design_for("generic", "minimal")), identity)
    async with repo.unit_of_work() as uow:  # assets never stored: a bug, never a broken zip
        await uow.store_pass_file("pass_orphan", _pass_file(signed), STAMP)

    assert await IssuerReads(repo.db).pass_file("pass_orphan") is None
