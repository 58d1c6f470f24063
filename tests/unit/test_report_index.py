"""``pulsarlab report DIR`` on a folder of scenario runs (``scenario run --out DIR``, a matrix): a
page per run beside its history, and ``DIR/index.html`` with the verdict table on top."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from pulsarlab.cli import app
from tests.report_runs import SCENARIO, write_run

runner = CliRunner()


def rows(index: Path) -> list[list[str]]:
    cells = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
    return [[re.sub(r"<[^>]+>|\s+", " ", c).strip() for c in cells.findall(r)]
            for r in re.findall(r"<tr>(.*?)</tr>", index.read_text(), re.S)[1:]]


def test_a_folder_of_runs_gets_a_page_each_and_an_index_linking_them(tmp_path: Path) -> None:
    write_run(tmp_path / "kill-topic-owner", scenario=True)
    (tmp_path / "sync-partition").mkdir()  # skipped --on a deployment: its verdict, no history
    (tmp_path / "sync-partition" / "scenario.json").write_text(json.dumps(
        {**SCENARIO, "scenario": "sync-partition", "status": "skipped", "skipped": "no network fault on hosts"}))
    r = runner.invoke(app, ["report", str(tmp_path)])
    assert r.exit_code == 0, r.output
    index = tmp_path / "index.html"
    assert r.stdout.strip() == str(index)
    assert (tmp_path / "kill-topic-owner" / "report.html").is_file()
    assert not (tmp_path / "sync-partition" / "report.html").exists()
    table = rows(index)
    assert [row[0] for row in table] == [SCENARIO["scenario"], "sync-partition"]
    assert table[0][1] == SCENARIO["status"] and "kill-topic-owner/report.html" in table[0][7]
    assert table[1][1] == "skipped" and table[1][8] == "no network fault on hosts"
    assert re.search(r"<h1>.*: PASS</h1>", index.read_text())  # the skipped run is shown, not judged


def test_a_run_whose_page_cannot_be_written_is_a_row_naming_why_and_exit_1(tmp_path: Path) -> None:
    write_run(tmp_path / "a", scenario=True)
    (tmp_path / "b").mkdir()  # ran, by its verdict, but its history is gone
    (tmp_path / "b" / "scenario.json").write_text(json.dumps({**SCENARIO, "scenario": "b", "status": "fail"}))
    r = runner.invoke(app, ["report", str(tmp_path)])
    assert r.exit_code == 1 and "1 run(s) without a page: b: no page: no history in" in r.stderr
    table = rows(tmp_path / "index.html")
    assert table[1][0] == "b" and table[1][7] == "" and table[1][8].startswith("no page: no history in")
    assert "FAIL</h1>" in (tmp_path / "index.html").read_text()  # the overall status counts every run that ran


def test_a_folder_with_neither_history_nor_runs_is_still_an_error(tmp_path: Path) -> None:
    r = runner.invoke(app, ["report", str(tmp_path)])
    assert r.exit_code == 1 and "no history in" in r.stderr
