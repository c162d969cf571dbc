"""Signed save links reused for a minute per pass version, then signed again; bounded."""

from datetime import UTC, datetime, timedelta

from services.api.pages.save_links import REUSE_SECONDS, SaveLinks

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_a_link_is_reused_for_its_version_within_the_minute_only() -> None:
    links = SaveLinks()
    links.put("pass_a", 3, "https://pay.google.com/gp/v/save/x", NOW)
    assert links.get("pass_a", 3, NOW + timedelta(seconds=59)) is not None
    assert links.get("pass_a", 4, NOW) is None  # another version: signed again
    assert links.get("pass_a", 3, NOW + timedelta(seconds=REUSE_SECONDS)) is None


def test_the_links_kept_are_bounded_the_oldest_forgotten() -> None:
    links = SaveLinks(max_links=2)
    for n in range(3):
        links.put(f"pass_{n}", 1, f"link {n}", NOW)
    assert links.get("pass_0", 1, NOW) is None
    assert links.get("pass_2", 1, NOW) == "link 2"
