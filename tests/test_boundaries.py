"""The services meet only through shared/, NATS and each owner's `reads.py` (docs/architecture.md).

Every import in services/ and shared/ (at any depth: inside functions too) is checked against
the rule, and the graph of services is acyclic. A service may import:

- its own package and shared/;
- another owner's `reads` module, where the table below allows it.
shared/ imports nothing from services/.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ("api", "issuer", "events", "webhooks")
# Whose `reads` module each service may import.
READS_ALLOWED: dict[str, frozenset[str]] = {
    "api": frozenset({"issuer", "events", "webhooks"}),
    "events": frozenset({"issuer"}),
    "webhooks": frozenset(),
    "issuer": frozenset(),
}


def imported_modules(source: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in `source`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.count(".") == 1:
                # `from services.issuer import repository`: the names are modules.
                for alias in node.names:
                    yield node.lineno, f"{node.module}.{alias.name}"
            else:
                yield node.lineno, node.module


def owner_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "shared":
        return "shared"
    if parts[0] == "services" and len(parts) > 1 and parts[1] in SERVICES:
        return parts[1]
    return None


def violation(importer: str, module: str) -> str | None:
    """Why `importer` (a service name or "shared") may not import `module`, or None."""
    target = owner_of(module)
    if target is None or target == importer or target == "shared":
        return None
    if importer == "shared":
        return "shared/ imports nothing from services/"
    parts = module.split(".")
    if len(parts) == 2:
        return None  # the package itself (`from services.issuer import reads` names the module)
    if parts[2] == "reads" and target in READS_ALLOWED[importer]:
        return None
    allowed = sorted(f"services.{name}.reads" for name in READS_ALLOWED[importer])
    return f"{importer} may import only its own package, shared and {allowed or 'no other service'}"


def violations(root: Path) -> list[str]:
    found = []
    for folder, importer in [
        *((f"services/{name}", name) for name in SERVICES),
        ("shared", "shared"),
    ]:
        for path in sorted((root / folder).rglob("*.py")):
            for line, module in imported_modules(path.read_text()):
                if (why := violation(importer, module)) is not None:
                    found.append(f"{path.relative_to(root)}:{line}: imports {module}: {why}")
    return found


def service_graph(root: Path) -> dict[str, set[str]]:
    """service -> the services whose modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in SERVICES}
    for name in SERVICES:
        for path in (root / "services" / name).rglob("*.py"):
            for _, module in imported_modules(path.read_text()):
                target = owner_of(module)
                if target in SERVICES and target != name:
                    graph[name].add(target)
    return graph


def has_cycle(graph: dict[str, set[str]]) -> bool:
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> bool:
        if node in visiting:
            return True
        if node in done:
            return False
        visiting.add(node)
        cyclic = any(visit(nxt) for nxt in graph.get(node, ()))
        visiting.discard(node)
        done.add(node)
        return cyclic

    return any(visit(node) for node in graph)


def test_services_import_only_their_own_package_shared_and_allowed_reads() -> None:
    assert violations(ROOT) == []


def test_the_services_import_graph_is_acyclic() -> None:
    assert not has_cycle(service_graph(ROOT))


def test_the_rule_catches_a_deliberate_violation(tmp_path: Path) -> None:
    for name in SERVICES:
        (tmp_path / "services" / name).mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "services/api/ok.py").write_text(
        "from services.issuer.reads import IssuerReads\nfrom shared.ids import new_id\n"
    )
    (tmp_path / "services/api/bad.py").write_text(
        "def later():\n    from services.issuer.repository import IssuerRepository\n"
    )
    (tmp_path / "services/webhooks/bad.py").write_text("from services.issuer import reads\n")
    (tmp_path / "services/issuer/bad.py").write_text("import services.events.repository\n")
    (tmp_path / "services/events/ok.py").write_text("from services.issuer.reads import X\n")
    (tmp_path / "shared/bad.py").write_text("from services.api.schemas import PassCreate\n")

    found = violations(tmp_path)

    assert [line.split(":")[0] for line in found] == [
        "services/api/bad.py",
        "services/issuer/bad.py",
        "services/webhooks/bad.py",
        "shared/bad.py",
    ]
    assert has_cycle({"issuer": {"events"}, "events": {"issuer"}})
    assert not has_cycle({"api": {"issuer", "events"}, "events": {"issuer"}, "issuer": set()})
