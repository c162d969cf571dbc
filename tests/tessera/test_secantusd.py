"""tessera/secantusd.py: SecantusDB's retryable-write records, kept oldest first, answer retries
and expire as before (what the fix changes is only their cost: `python -m bench.store_costs`)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from secantus import transactions
from secantus.transactions import TransactionRegistry

from tessera.processes import mongo_argv
from tessera.secantusd import keep_records_in_order

LIFETIME = transactions._RETRYABLE_RECORD_LIFETIME_SECONDS
IDENTITY = b"update passes"
REPLY = {"ok": 1.0, "n": 1, "nModified": 1}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Registry(TransactionRegistry):  # type: ignore[misc]  # SecantusDB is untyped
    """Patched apart from SecantusDB's own class, which the test process leaves as shipped."""


@pytest.fixture(scope="module", autouse=True)
def patched() -> None:
    assert keep_records_in_order(Registry), "the installed SecantusDB is not the one patched"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry(clock: Clock) -> Registry:
    return Registry(time_func=clock)


def write(registry: Registry, number: int, identity: bytes = IDENTITY) -> None:
    registry.record_retryable(b"session", number, identity, REPLY | {"number": number})


def answered(registry: Registry, number: int, identity: bytes = IDENTITY) -> bool:
    return registry.retryable_reply(b"session", number, identity) is not None


def test_a_retry_gets_the_first_reply(registry: Registry) -> None:
    write(registry, 1)

    assert registry.retryable_reply(b"session", 1, IDENTITY) == REPLY | {"number": 1}
    assert not answered(registry, 1, b"another write under the same number")
    assert not answered(registry, 2)


def test_a_failed_write_is_not_recorded(registry: Registry) -> None:
    registry.record_retryable(b"session", 1, IDENTITY, {"ok": 0.0, "code": 112})

    assert not answered(registry, 1)


def test_records_go_when_their_lifetime_ends(registry: Registry, clock: Clock) -> None:
    write(registry, 1)
    clock.now += LIFETIME / 2
    write(registry, 2)
    clock.now += LIFETIME / 2 + 1

    assert not answered(registry, 1)
    assert answered(registry, 2)


def test_past_the_cap_the_oldest_go(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transactions, "_RETRYABLE_RECORD_MAX", 5)
    for number in range(1, 9):
        write(registry, number)

    assert [answered(registry, number) for number in range(1, 9)] == [False] * 3 + [True] * 5


def test_a_record_stored_again_is_kept_for_its_new_lifetime(
    registry: Registry, clock: Clock
) -> None:
    write(registry, 1)
    clock.now += 1
    write(registry, 2)
    clock.now += 1
    write(registry, 1, b"the number reused by another write")
    clock.now += LIFETIME - 0.5  # past write 2's lifetime, within the second write 1's

    assert answered(registry, 1, b"the number reused by another write")
    assert not answered(registry, 2)


def test_the_stack_runs_the_fixed_store() -> None:
    assert mongo_argv("127.0.0.1", 27017, Path("data"))[1:3] == ["-m", "tessera.secantusd"]


def test_without_secantusdb_the_stack_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)

    with pytest.raises(FileNotFoundError, match=r"pip install -e '\.\[embedded\]'"):
        mongo_argv("127.0.0.1", 27017, Path("data"))


def test_a_registry_of_other_internals_is_left_as_it_is() -> None:
    class Other(TransactionRegistry):  # type: ignore[misc]  # SecantusDB is untyped
        def __init__(self) -> None:
            self._replies: dict[tuple[bytes, int], object] = {}  # not the records patched

    prune = Other._prune_retryable_locked

    assert not keep_records_in_order(Other)
    assert Other._prune_retryable_locked is prune


def test_every_patch_knows_the_installed_secantusdb() -> None:
    """A patch that does not know the store's internals leaves it as shipped, saying so only on
    stderr: here, in a process of its own (the patches change the store's classes), each one
    must apply to the SecantusDB the lock files install."""
    probe = "from tessera import secantusd; print([install() for install, _ in secantusd.PATCHES])"
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout.strip() == str([True] * 5), ran.stderr
