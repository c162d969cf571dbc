"""Issue 7, section 4: under a steady load of pass creations, updates and webhook deliveries,
kill -9 each service in turn and restart it, restart nats-server, restart the store; then
nothing acknowledged is lost, nothing is recorded twice, and nothing is left pending (the
scenario and what it checks: tests/support/fault_scenario.py)."""

import pytest

from tests.support.fault_scenario import Fault, run_under_faults
from tests.support.faults import Server
from tests.support.receiver import Receiver
from tests.support.stack import Stack

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.slow]


def _faults(stack: Stack, nats: Server, store: Server) -> list[Fault]:
    def kill_9(name: str) -> Fault:
        def inject() -> None:
            stack.kill(name)
            stack.start(name)

        return Fault(f"kill -9 {name} (every replica)", inject)

    def kill_9_one(replica: str) -> Fault:
        def inject() -> None:
            stack.kill(replica)  # its twin keeps serving meanwhile
            stack.children[replica].start()

        return Fault(f"kill -9 {replica} only", inject)

    return [
        *(kill_9_one(f"{name}-2") for name in ("issuer", "webhooks")),
        *(kill_9(name) for name in ("api", "issuer", "events", "webhooks")),
        Fault("restart nats-server (SIGTERM)", lambda: nats.restart()),
        Fault("restart the store (SIGTERM)", lambda: store.restart()),
        Fault("kill -9 nats-server, start it", lambda: nats.restart(kill=True)),
        Fault("kill -9 the store, start it", lambda: store.restart(kill=True)),
    ]


@pytest.mark.timeout(420)
def test_every_process_killed_and_restarted_under_load(
    stack: Stack, nats: Server, store: Server, receiver: Receiver
) -> None:
    run_under_faults(stack, receiver, _faults(stack, nats, store))
