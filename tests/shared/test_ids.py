import itertools

from shared.ids import ALPHABET, PREFIXES, has_prefix, new_id, random_token, short_slug


def test_ids_carry_their_prefix_and_sort_by_creation() -> None:
    ids = [new_id("pass") for _ in range(2000)]
    assert all(value.startswith("pass_") and has_prefix(value, "pass") for value in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_has_prefix_rejects_other_kinds_and_malformed_bodies() -> None:
    value = new_id("template")
    assert has_prefix(value, "template")
    assert not has_prefix(value, "pass")
    assert not has_prefix(value + "x", "template")
    assert not has_prefix("tmpl_" + "!" * 22, "template")


def test_spec_prefixes() -> None:
    assert PREFIXES["pass_event"] == "psEvnt"
    assert new_id("webhook_delivery").startswith("whd_")
    assert random_token("download_link").startswith("pdl_")
    assert len(random_token("webhook_secret")) > 30


def test_short_slugs_are_url_safe_and_long_enough() -> None:
    slug = short_slug()
    assert len(slug) == 16
    assert slug.isalnum()


def test_an_unguessable_id_does_not_tell_the_next() -> None:
    """Ids made within one millisecond follow each other; an id that is itself a secret (a
    pass bundle's page) keeps its 80 random bits, so a client that makes two cannot tell
    another's in between."""

    def steps(ids: list[str]) -> list[int]:
        values = [_value(made) for made in ids]
        return [b - a for a, b in itertools.pairwise(values)]

    plain = steps([new_id("pass_bundle") for _ in range(500)])
    secret = steps([new_id("pass_bundle", unguessable=True) for _ in range(500)])
    assert plain.count(1) > 100  # the many made within one millisecond
    assert secret.count(1) == 0


def _value(made: str) -> int:
    value = 0
    for char in made.split("_", 1)[1]:
        value = value * 62 + ALPHABET.index(char)
    return value
