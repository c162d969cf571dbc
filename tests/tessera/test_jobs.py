"""`tessera import` uploads a CSV as an import job, follows it to the end and writes the results
file; `tessera jobs watch` follows a job; both read the URL and key from flags or TESSERA_*,
say what went wrong and exit 1 when the import fails."""

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from tessera.cli import main
from tests.support.api import TEMPLATE_BODY, all_passes, create_template, list_page
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as file:
        csv.writer(file).writerows(rows)
    return path


def test_import_uploads_watches_and_writes_the_results(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    rows = [["holder_name", "seat", "metadata.order"]]
    rows += [[f"Fan {n}", f"B{n}", str(n)] for n in range(1, 121)]
    rows[7] = ["Fan 7", "B7"]  # row 7: a cell short
    source = _write_csv(tmp_path / "tickets.csv", rows)
    flags = ["--base-url", stack.base_url, "--key", account.test_key]

    assert main(["import", str(source), "--template", template["id"], *flags]) == 0

    results = tmp_path / "tickets.results.csv"
    lines = list(csv.DictReader(io.StringIO(results.read_text())))
    assert [int(line["row"]) for line in lines] == list(range(1, 121))
    assert [line["row"] for line in lines if line["status"] != "201"] == ["7"]
    with stack.client(headers=account.headers()) as client:
        passes = {p["id"]: p for p in all_passes(client)}
        [job] = list_page(client, "/v1/jobs")["data"]
    assert {line["pass_id"] for line in lines if line["status"] == "201"} == set(passes)
    assert all(line["download_url"].startswith(stack.base_url) for line in lines if line["pass_id"])
    said = capsys.readouterr().err
    assert f"job {job['id']} succeeded: 119 passes issued, 1 rows failed" in said
    assert "results (120 rows)" in said

    # The same command again is the same import (its key is derived from the file): no new job.
    again = tmp_path / "again.csv"
    assert (
        main(["import", str(source), "--template", template["id"], "--output", str(again), *flags])
        == 0
    )
    assert again.read_text() == results.read_text()
    with stack.client(headers=account.headers()) as client:
        assert len(list_page(client, "/v1/jobs")["data"]) == 1

    # Days later the API has forgotten the key (24 hours): the note beside the file still
    # answers the same job, and --again imports the file a second time.
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        mongo[stack.database]["idempotency_keys"].delete_many({})
    later = ["import", str(source), "--template", template["id"], *flags]
    assert main(later) == 0
    assert "imported already" in capsys.readouterr().err
    with stack.client(headers=account.headers()) as client:
        assert len(list_page(client, "/v1/jobs")["data"]) == 1
    assert main([*later, "--again"]) == 0
    with stack.client(headers=account.headers()) as client:
        assert len(list_page(client, "/v1/jobs")["data"]) == 2


def test_jobs_watch_reads_the_environment_and_failures_exit_1(
    stack: Stack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"type": "import_passes", "template_id": template["id"], "rows": [{}, {}]}
        job = client.post("/v1/jobs", json=body).json()
    monkeypatch.setenv("TESSERA_BASE_URL", stack.base_url)
    monkeypatch.setenv("TESSERA_KEY", account.test_key)

    assert main(["jobs", "watch", job["id"]]) == 0
    assert f"job {job['id']} succeeded: 2 passes issued" in capsys.readouterr().err

    bad = _write_csv(tmp_path / "bad.csv", [["holder_name", "shoe_size"], ["Ada", "9"]])
    assert main(["import", str(bad), "--template", template["id"]]) == 1
    said = capsys.readouterr().err
    assert "shoe_size" in said
    assert "400" in said
    assert not (tmp_path / "bad.results.csv").exists()
    assert main(["jobs", "watch", "job_nope"]) == 1
    monkeypatch.delenv("TESSERA_KEY")
    assert main(["jobs", "watch", job["id"]]) == 1
    assert "TESSERA_KEY" in capsys.readouterr().err


def test_again_imports_anew_at_once_and_server_text_is_printed_as_sent(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--again within the API's 24 hours made no second job (the derived key replayed the
    first); a message repeating a column like `[/x]` made rich raise instead of printing it."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    source = _write_csv(tmp_path / "few.csv", [["holder_name"], ["Ada"], ["Grace"]])
    command = ["import", str(source), "--template", template["id"]]
    flags = ["--base-url", stack.base_url, "--key", account.test_key]
    assert main([*command, *flags]) == 0
    assert main([*command, *flags, "--again"]) == 0
    with stack.client(headers=account.headers()) as client:
        assert len(list_page(client, "/v1/jobs")["data"]) == 2
        assert len(all_passes(client)) == 4

    bad = _write_csv(tmp_path / "bad.csv", [["holder_name", "[/x]"], ["Ada", "9"]])
    capsys.readouterr()
    assert main(["import", str(bad), "--template", template["id"], *flags]) == 1
    assert "Unknown column '[/x]'" in capsys.readouterr().err


def test_a_noted_job_the_api_no_longer_knows_is_not_imported_again_unasked(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past its retention (90 days) the job is gone: the command imported every row again,
    making each pass a second time, where the note said the file was imported."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    source = _write_csv(tmp_path / "once.csv", [["holder_name"], ["Ada"]])
    command = ["import", str(source), "--template", template["id"]]
    flags = ["--base-url", stack.base_url, "--key", account.test_key]
    assert main([*command, *flags]) == 0
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        mongo[stack.database]["idempotency_keys"].delete_many({})
        mongo[stack.database]["jobs"].delete_many({"account_id": account.id})  # purged
    capsys.readouterr()
    assert main([*command, *flags]) == 1
    assert "--again" in capsys.readouterr().err
    with stack.client(headers=account.headers()) as client:
        assert len(all_passes(client)) == 1
    assert main([*command, *flags, "--again"]) == 0
