"""Issue 12, acceptance 6 (rollouts): kill -9 every issuer replica in turn, then all of them at
once, while a template rollout re-renders 3,000 passes. The job finishes; every pass is at the
final design_version, changed once (version 2); exactly one `updated` event is recorded per
pass, and no event twice.

A chunk's passes, files, events and outcome commit in one transaction, guarded by its lease,
and each pass is replaced only at the version it was read at: a chunk taken over after a kill
changes nothing twice.
"""

import time
from collections import Counter
from typing import Any

import pytest

from tests.faults.test_job_faults import FINISHED, JOB_TIMEOUT, _job, _store
from tests.support.api import TEMPLATE_BODY, create_template, ok
from tests.support.faults import kill_and_restart, log_problems
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.slow]

PASSES = 3000
PROGRESS_BETWEEN_KILLS = 400


@pytest.mark.timeout(600)
def test_a_rollout_survives_kill_9_of_every_issuer_replica(stack: Stack) -> None:
    account = stack.new_account(plan="paid")
    rows = [{"holder_name": f"row-{n}"} for n in range(1, PASSES + 1)]
    timings: list[str] = []
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"type": "import_passes", "template_id": template["id"], "rows": rows}
        imported = ok(client.post("/v1/jobs", json=body), 202)
        poll(
            lambda: _job(client, imported["id"]),
            lambda found: found["status"] in FINISHED,
            timeout=JOB_TIMEOUT,
            message="the import",
        )
        moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
        patched = ok(client.patch(f"/v1/templates/{template['id']}", json={"design": moved}))
        job_id = patched["rollout_job_id"]
        replicas = stack.replica_names("issuer")
        assert len(replicas) >= 2
        try:
            progress = 0
            for victims in [[name] for name in replicas] + [replicas]:
                target = progress + PROGRESS_BETWEEN_KILLS

                def reached(found: dict[str, Any], at_least: int = target) -> bool:
                    return bool(found["processed"] >= at_least or found["status"] in FINISHED)

                seen = poll(
                    lambda: _job(client, job_id),
                    reached,
                    timeout=JOB_TIMEOUT,
                    message=f"{target} passes processed",
                    interval=0.1,
                )
                assert seen["status"] == "running", f"the rollout ended early: {seen}"
                progress = seen["processed"]
                killed_at = time.monotonic()
                kill_and_restart(stack, victims)
                timings.append(
                    f"  kill -9 {' and '.join(victims)} at {progress} passes: back in "
                    f"{time.monotonic() - killed_at:.1f}s"
                )
            done = poll(
                lambda: _job(client, job_id),
                lambda found: found["status"] in FINISHED,
                timeout=JOB_TIMEOUT,
                message="the rollout to finish",
                interval=0.2,
            )
        finally:
            logs = stack.work_dir / "logs"
            print(f"\nwarnings and errors in {logs}:", *log_problems(logs) or ["  none"], sep="\n")
    print("rollout faults:", *timings, sep="\n")
    assert (done["status"], done["processed"], done["succeeded"], done["failed"]) == (
        "succeeded",
        PASSES,
        PASSES,
        0,
    )
    mongo, db = _store(stack)
    with mongo:
        scope = {"account_id": account.id}
        passes = list(db.passes.find(scope, {"design_version": 1, "version": 1}))
        assert len(passes) == PASSES
        assert Counter((p["design_version"], p["version"]) for p in passes) == {(2, 2): PASSES}

        def updated() -> list[dict[str, Any]]:
            return list(db.pass_events.find({**scope, "type": "updated"}, {"pass_id": 1}))

        events = poll(updated, lambda found: len(found) >= PASSES, timeout=120, message="events")
        per_pass = Counter(event["pass_id"] for event in events)
        assert set(per_pass) == {p["_id"] for p in passes}
        assert max(per_pass.values()) == 1, "a pass has two updated events"
