"""The `tessera` command: `tessera up` and `tessera accounts create`."""

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from services.api.accounts import Plan, create_account
from services.api.repository import ApiRepository
from shared.clock import SystemClock
from shared.mongo import create_client
from tessera.launcher import up


def _mongo_url(data_dir: Path) -> str:
    """TESSERA_MONGODB_URL, else the store of a running `tessera up` on the same data dir."""
    if url := os.environ.get("TESSERA_MONGODB_URL"):
        return url
    ready = data_dir / "ready.json"
    if ready.exists():
        url_from_ready: str = json.loads(ready.read_text())["mongodb_url"]
        return url_from_ready
    raise SystemExit("tessera: set TESSERA_MONGODB_URL or start `tessera up` first")


async def _create_account(mongo_url: str, name: str, plan: Plan) -> dict[str, object]:
    client = create_client(mongo_url)
    try:
        repo = ApiRepository(client[os.environ.get("TESSERA_MONGODB_DATABASE", "tessera")])
        await repo.ensure_indexes()
        return await create_account(repo, SystemClock(), name, plan)
    finally:
        await client.close()


def _at_least_one(value: str) -> int:
    count = int(value)
    if count < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tessera")
    commands = parser.add_subparsers(dest="command", required=True)
    up_cmd = commands.add_parser("up", help="run the whole stack on this machine")
    up_cmd.add_argument("--data-dir", type=Path, default=Path(".tessera"))
    up_cmd.add_argument("--host", default="127.0.0.1")
    up_cmd.add_argument("--port", type=int, default=8000)
    up_cmd.add_argument(
        "--replicas",
        type=_at_least_one,
        default=1,
        help="processes of each service, sharing its port (SO_REUSEPORT; Linux)",
    )
    accounts = commands.add_parser("accounts", help="manage accounts")
    account_cmds = accounts.add_subparsers(dest="action", required=True)
    create = account_cmds.add_parser("create", help="create an account and print its keys")
    create.add_argument("--name", required=True)
    create.add_argument("--plan", choices=["free", "paid"], required=True)
    create.add_argument("--data-dir", type=Path, default=Path(".tessera"))
    args = parser.parse_args(argv)
    if args.command == "up":
        return up(args.data_dir, args.host, args.port, args.replicas)
    created = asyncio.run(_create_account(_mongo_url(args.data_dir), args.name, args.plan))
    json.dump(created, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
