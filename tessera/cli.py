"""The `tessera` command: `tessera up`, `tessera accounts create`, `tessera import` and
`tessera jobs watch`."""

import argparse
import asyncio
import csv
import json
import sys
from importlib.metadata import version
from pathlib import Path

import httpx2
from rich.console import Console

from services.api.accounts import Plan, create_account
from services.api.repository import ApiRepository
from shared.clock import SystemClock
from shared.mongo import create_client
from tessera import jobs
from tessera.launcher import up
from tessera.processes import base_env


def _mongo_url(data_dir: Path) -> str:
    """TESSERA_MONGODB_URL, else the store of a running `tessera up` on the same data dir."""
    if url := base_env().get("TESSERA_MONGODB_URL"):
        return url
    ready = data_dir / "ready.json"
    if ready.exists():
        url_from_ready: str = json.loads(ready.read_text())["mongodb_url"]
        return url_from_ready
    raise SystemExit("tessera: set TESSERA_MONGODB_URL or start `tessera up` first")


async def _create_account(mongo_url: str, name: str, plan: Plan) -> dict[str, object]:
    client = create_client(mongo_url)
    try:
        # The database the services use: the environment's, else the dotenv file's.
        repo = ApiRepository(client[base_env().get("TESSERA_MONGODB_DATABASE", "tessera")])
        await repo.ensure_indexes()
        return await create_account(repo, SystemClock(), name, plan)
    finally:
        await client.close()


def _at_least_one(value: str) -> int:
    count = int(value)
    if count < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return count


def _jobs_command(args: argparse.Namespace) -> int:
    # No markup: what it prints repeats the API's messages, which repeat the upload's own
    # text ("Unknown column '[/x]'" made rich raise, a `[b]` vanished).
    console = Console(stderr=True, markup=False)
    try:
        target = jobs.Target.of(args.base_url, args.key)
        if args.command == "import":
            return jobs.run_import(
                target,
                args.file,
                args.template,
                args.output,
                args.idempotency_key,
                console,
                again=args.again,
            )
        return jobs.run_watch(target, args.job_id, console)
    except (
        jobs.JobsError,
        OSError,
        httpx2.HTTPError,
        httpx2.InvalidURL,
        ValueError,
        csv.Error,  # a results file the csv module cannot count
    ) as exc:
        # ValueError: an answer that is not JSON (not Tessera's API at that URL, say).
        console.print(f"tessera: {exc}")
        return 1
    except KeyboardInterrupt:
        console.print("tessera: interrupted; a job already made runs on (tessera jobs watch ID)")
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('tessera')}")
    commands = parser.add_subparsers(dest="command", required=True)
    up_cmd = commands.add_parser(
        "up",
        help="run the whole stack on this machine",
        description="Run nats-server, secantusd-py and the four services on this machine, "
        "with a development account, until Ctrl+C. Set TESSERA_NATS_URL or "
        "TESSERA_MONGODB_URL to use servers of your own instead of the embedded ones.",
    )
    up_cmd.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".tessera"),
        help="where the store, signing keys, logs and ready.json live; one stack per directory "
        "(default: %(default)s)",
    )
    up_cmd.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address the four services bind; the embedded NATS and store stay on "
        "127.0.0.1 (default: %(default)s)",
    )
    up_cmd.add_argument(
        "--port",
        type=int,
        default=8000,
        help="the api's port; events, issuer and webhooks take the next three "
        "(default: %(default)s)",
    )
    up_cmd.add_argument(
        "--replicas",
        type=_at_least_one,
        default=1,
        help="processes of each service, sharing its port (SO_REUSEPORT; Linux; default: "
        "%(default)s)",
    )
    up_cmd.add_argument(
        "--nats-cluster",
        dest="nats_nodes",
        type=int,
        choices=[1, 3, 5],
        default=1,
        metavar="N",
        help="run N nats-server nodes (1, 3 or 5) as one JetStream cluster, every stream "
        "with N replicas, so the stack rides out the loss of a node (docs/scaling.md; "
        "default: %(default)s, a single server)",
    )
    up_cmd.add_argument(
        "--no-logs",
        dest="stream_logs",
        action="store_false",
        help="do not print a line per request and each warning to the terminal "
        "(the JSON log files are written either way)",
    )
    accounts = commands.add_parser("accounts", help="manage accounts")
    account_cmds = accounts.add_subparsers(dest="action", required=True)
    create = account_cmds.add_parser("create", help="create an account and print its keys")
    create.add_argument("--name", required=True)
    create.add_argument("--plan", choices=["free", "paid"], required=True)
    create.add_argument("--data-dir", type=Path, default=Path(".tessera"))
    api_flags = argparse.ArgumentParser(add_help=False)
    api_flags.add_argument("--base-url", help="the API's URL (default: $TESSERA_BASE_URL)")
    api_flags.add_argument("--key", help="an API key (default: $TESSERA_KEY)")
    imports = commands.add_parser(
        "import", parents=[api_flags], help="import passes from a CSV file as a job"
    )
    imports.add_argument("file", type=Path, help="CSV: holder_name, holder_email, fields, ...")
    imports.add_argument("--template", required=True, help="the template's id (tmpl_...)")
    imports.add_argument("--output", type=Path, help="results file (default FILE.results.csv)")
    imports.add_argument(
        "--idempotency-key", help="default: derived from the template and the file's bytes"
    )
    imports.add_argument(
        "--again",
        action="store_true",
        help="import the file even if it was imported already (FILE.import.json notes the job)",
    )
    job_cmds = commands.add_parser("jobs", help="follow jobs").add_subparsers(
        dest="action", required=True
    )
    watch = job_cmds.add_parser("watch", parents=[api_flags], help="a job's live progress")
    watch.add_argument("job_id")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        return up(
            args.data_dir,
            args.host,
            args.port,
            args.replicas,
            stream_logs=args.stream_logs,
            nats_nodes=args.nats_nodes,
        )
    if args.command in ("import", "jobs"):
        return _jobs_command(args)
    created = asyncio.run(_create_account(_mongo_url(args.data_dir), args.name, args.plan))
    json.dump(created, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
