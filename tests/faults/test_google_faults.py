"""Issue 15: the Google step is at least once and idempotent by object id under kill -9.

A stack with "production" credentials (tests/support/live_credentials.py; Google's REST API is
the local fake), two issuer replicas. 100 live passes are issued while Google answers 500, so
every pass waits for its Google object; then Google answers again and every issuer replica is
killed with kill -9 twice while the step catches up (leased steps of a killed replica are taken
over when their lease runs out). In the end every pass shows `google_status` "synced", and the
fake holds exactly one ACTIVE object per pass, whatever was retried.
"""

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.faults.conftest import FAULT_ENV, REPLICAS
from tests.support.api import create_template, ok, post_retrying
from tests.support.fake_google import FakeGoogle, running_fake_google
from tests.support.faults import Server, kill_and_restart, log_problems
from tests.support.live_credentials import live_credentials
from tests.support.polling import poll
from tests.support.stack import Stack, new_stack, serving

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.slow]

PASSES = 100
DEADLINE_SECONDS = 180.0
# A killed replica's leased steps are taken over this soon.
LEASE_SECONDS = "5"
# Each Google call takes this long: two replicas of two workers make about 20 objects a second.
GOOGLE_DELAY_SECONDS = 0.2


@pytest.fixture(scope="module")
def fake_google() -> Iterator[FakeGoogle]:
    with running_fake_google() as fake:
        yield fake


@pytest.fixture(scope="module")
def google_stack(
    nats: Server, store: Server, fake_google: FakeGoogle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    work_dir: Path = tmp_path_factory.mktemp("google-stack")
    built = new_stack(nats.url, store.url, work_dir, replicas=REPLICAS)
    built.extra_env = (
        FAULT_ENV
        | live_credentials(work_dir, fake_google)
        | {
            "TESSERA_ISSUER_GOOGLE_SYNC_LEASE_SECONDS": LEASE_SECONDS,
            "TESSERA_ISSUER_GOOGLE_SYNC_POLL_SECONDS": "1",
            # With a slow Google (below), the step takes seconds: the kills come mid-work.
            "TESSERA_ISSUER_GOOGLE_SYNC_WORKERS": "2",
        }
    )
    with serving(built):
        yield built


def _objects_of(fake_google: FakeGoogle, pass_ids: list[str]) -> Counter[str]:
    """How many objects the fake holds for each pass (keyed by the pass id in the object id)."""
    suffixes = {pass_id.split("_", 1)[1]: pass_id for pass_id in pass_ids}
    found: Counter[str] = Counter()
    for object_id in list(fake_google.objects):
        for suffix, pass_id in suffixes.items():
            if suffix in object_id:
                found[pass_id] += 1
    return found


def _made_at_least(fake_google: FakeGoogle, pass_ids: list[str], count: int) -> bool:
    return len(_objects_of(fake_google, pass_ids)) >= count


# A kill inside one of the step's transactions holds its passes for the store's transaction
# lifetime (60 s, docs/architecture.md#failure-behaviour) before they are synced.
@pytest.mark.timeout(300)
def test_the_google_step_survives_kill_9_of_every_issuer(
    google_stack: Stack, fake_google: FakeGoogle
) -> None:
    stack = google_stack
    account = stack.new_account(plan="paid")
    timings: list[str] = []
    fake_google.delay_seconds = GOOGLE_DELAY_SECONDS  # answers after the outage's, slowly
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        fake_google.outage_status = 500
        started = time.monotonic()
        try:
            rows = [{"template_id": template["id"]} for _ in range(PASSES)]
            key = {"Idempotency-Key": str(uuid.uuid4())}
            made = ok(
                post_retrying(live, "/v1/passes/batch", {"passes": rows}, key["Idempotency-Key"])
            )
            pass_ids = [row["pass"]["id"] for row in made["data"]]
            timings.append(f"  batch made in {time.monotonic() - started:.1f}s")
            assert len(pass_ids) == PASSES
            assert _objects_of(fake_google, pass_ids) == Counter()
        finally:
            fake_google.outage_status = None
        replicas = stack.replica_names("issuer")
        try:
            for victims, at_least in (([replicas[0]], 10), (replicas, 40)):
                poll(
                    partial(_made_at_least, fake_google, pass_ids, at_least),
                    timeout=DEADLINE_SECONDS,
                    message=f"{at_least} Google objects",
                )
                killed_at = time.monotonic()
                timings.append(f"  {at_least} objects at {killed_at - started:.1f}s")
                made_then = len(_objects_of(fake_google, pass_ids))
                kill_and_restart(stack, victims)
                timings.append(
                    f"  kill -9 {' and '.join(victims)} at {made_then} objects: back in "
                    f"{time.monotonic() - killed_at:.1f}s"
                )

            def statuses() -> Counter[str]:
                # The account's only live passes: one page holds them all.
                listed = ok(live.get("/v1/passes", params={"limit": PASSES}))["data"]
                return Counter(found["google_status"] for found in listed)

            timings.append(f"  restarted at {time.monotonic() - started:.1f}s")
            poll(
                statuses,
                lambda found: found == {"synced": PASSES},
                timeout=DEADLINE_SECONDS,
                message="every pass's Google object synced",
            )
        finally:
            fake_google.delay_seconds = 0.0
            logs = stack.work_dir / "logs"
            print(f"\nwarnings and errors in {logs}:", *log_problems(logs) or ["  none"], sep="\n")
    timings.append(f"  all synced at {time.monotonic() - started:.1f}s")
    print("google step faults:", *timings, sep="\n")
    objects = _objects_of(fake_google, pass_ids)
    assert objects == dict.fromkeys(pass_ids, 1)
    states = Counter(
        stored.get("state")
        for object_id, stored in list(fake_google.objects.items())
        if any(pass_id.split("_", 1)[1] in object_id for pass_id in pass_ids)
    )
    assert states == {"ACTIVE": PASSES}
