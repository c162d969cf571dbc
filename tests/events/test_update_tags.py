"""The update tags: `lastUpdated` lists pass versions, and If-Modified-Since compares seconds."""

from datetime import UTC, datetime, timedelta

from services.events.update_tags import (
    MAX_TAG_LENGTH,
    changed_since,
    decode_tag,
    encode_tag,
    not_modified,
    stored_tag_id,
    updated_since,
)
from shared.http_date import http_date


def test_a_tag_round_trips_and_does_not_reveal_serial_numbers() -> None:
    tag = encode_tag({"serial-a": 1, "serial-b": 7})
    assert "serial" not in tag
    decoded = decode_tag(tag)
    assert decoded is not None
    assert sorted(decoded.values()) == [1, 7]
    assert encode_tag({"serial-b": 7, "serial-a": 1}) == tag  # order does not matter


def test_only_passes_whose_version_changed_are_listed() -> None:
    tag = encode_tag({"a": 1, "b": 1})
    assert updated_since({"a": 1, "b": 1}, tag) == []
    assert updated_since({"a": 2, "b": 1}, tag) == ["a"]
    # A pass registered after the tag was handed out is listed: the device may lack its update.
    assert updated_since({"a": 1, "b": 1, "c": 1}, tag) == ["c"]


def test_without_a_usable_tag_every_pass_is_listed() -> None:
    versions = {"b": 3, "a": 1}
    huge_version = "v1.abcdef123456-" + "9" * 4301  # int() refuses it: it was a 500
    for tag in (None, "", "junk", "v1.abc-x", "v1." + "a" * MAX_TAG_LENGTH, huge_version):
        assert updated_since(versions, tag) == ["a", "b"], tag
    assert decode_tag("v1.") == {}


def test_if_modified_since_is_not_modified_from_the_stamp_on() -> None:
    stamp = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert http_date(stamp) == "Tue, 06 May 2031 07:08:09 GMT"
    assert not_modified(http_date(stamp), stamp)
    assert not_modified(http_date(stamp + timedelta(seconds=1)), stamp)
    assert not not_modified(http_date(stamp - timedelta(seconds=1)), stamp)
    assert not not_modified("Tue, 06 May 2031 07:08:09", stamp + timedelta(seconds=1))
    # Not a date HTTP knows (the last, a number too large for one): ignored, as RFC 9110 says.
    for value in (None, "", "yesterday", "1 Jan 2020 00:99999999999999999999"):
        assert not not_modified(value, stamp)


def test_a_kept_tag_has_a_short_id_and_decodes_past_the_length_a_device_may_send() -> None:
    versions = {f"serial-{n}": n % 7 + 1 for n in range(5000)}
    tag = encode_tag(versions)
    assert len(tag) > MAX_TAG_LENGTH
    assert decode_tag(tag) is None  # as a device's v1 tag: too long to be ours
    known = decode_tag(tag, max_length=len(tag))
    assert changed_since(versions, known) == []
    assert changed_since(versions | {"serial-9": 99}, known) == ["serial-9"]
    tag_id = stored_tag_id(tag)
    assert len(tag_id) == 22
    assert tag_id == stored_tag_id(encode_tag(dict(versions)))
    assert tag_id != stored_tag_id(encode_tag(versions | {"serial-9": 99}))
