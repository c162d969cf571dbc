"""MongoDB commands per request, read from the services' own counters.

Every service counts the commands its MongoDB client sends in
`tessera_mongodb_commands_total{service, command, origin}` (shared/mongo.py). A benchmark scrapes
every service's /metrics before and after a run and divides the difference by the requests that
succeeded: what one request cost each service, by origin (`http`, `command`, `consumer`,
`background`) and by command name.
"""

from collections import defaultdict
from dataclasses import dataclass, field

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from tessera.processes import PORT_OFFSETS

SAMPLE = "tessera_mongodb_commands_total"
# Sent by the readiness checks and the scrapes themselves, not by the work measured.
IGNORED_COMMANDS = frozenset({"ping"})


@dataclass
class Counts:
    """(service, origin, command) -> commands sent so far."""

    values: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def minus(self, earlier: "Counts") -> "Counts":
        keys = set(self.values) | set(earlier.values)
        return Counts(
            {key: self.values.get(key, 0.0) - earlier.values.get(key, 0.0) for key in keys}
        )


# What a request does before its response; the rest (consumers, relays) runs after it.
REQUEST_ORIGINS = frozenset({"http", "command"})


def level_delta(before: Counts, answered: Counts, settled: Counts) -> Counts:
    """One run's commands: the request path's as of the last response (`answered`), and the
    consumers' and relays' once every event was recorded (`settled`), so the requests that
    waited for the events (api http commands) are not counted."""
    request = answered.minus(before)
    after = settled.minus(before)
    values = {
        key: (request if key[1] in REQUEST_ORIGINS else after).values.get(key, 0.0)
        for key in set(request.values) | set(after.values)
    }
    return Counts(values)


def parse(text: str) -> Counts:
    """The command counters of one /metrics page."""
    values: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != SAMPLE or sample.labels["command"] in IGNORED_COMMANDS:
                continue
            key = (sample.labels["service"], sample.labels["origin"], sample.labels["command"])
            values[key] = values.get(key, 0.0) + sample.value
    return Counts(values)


def scrape(host: str, api_port: int) -> Counts:
    """The counters of the four services of a single-replica stack (`tessera up`)."""
    total: dict[tuple[str, str, str], float] = defaultdict(float)
    for service, offset in PORT_OFFSETS.items():
        response = httpx2.get(f"http://{host}:{api_port + offset}/metrics", timeout=30.0)
        response.raise_for_status()
        for key, value in parse(response.text).values.items():
            if key[0] == service:
                total[key] += value
    return Counts(dict(total))


def per_request(delta: Counts, requests: int) -> dict[str, dict[str, float]]:
    """service -> {origin: commands per request, ..., "total": all origins}; rounded."""
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (service, origin, _), value in delta.values.items():
        table[service][origin] += value / requests
        table[service]["total"] += value / requests
    return {
        service: {origin: round(value, 3) for origin, value in sorted(row.items())}
        for service, row in sorted(table.items())
    }


def by_command(delta: Counts, requests: int) -> dict[str, float]:
    """ "service/origin/command" -> commands per request, for the largest shares first."""
    rows = {
        f"{service}/{origin}/{command}": round(value / requests, 3)
        for (service, origin, command), value in delta.values.items()
        if value
    }
    return dict(sorted(rows.items(), key=lambda item: -item[1]))


def table(per: dict[str, dict[str, float]]) -> str:
    origins = ["http", "command", "consumer", "background", "total"]
    lines = ["service   " + "".join(f"{name:>12}" for name in origins)]
    for service, row in per.items():
        lines.append(f"{service:<10}" + "".join(f"{row.get(name, 0.0):>12.2f}" for name in origins))
    return "\n".join(lines)
