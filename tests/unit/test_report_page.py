"""The report page's content (without a browser) and the ``pulsarlab report`` command's edges."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.history.faults import FAULTS_FILE, FaultJournal, FaultRow, NodeWindow
from pulsarlab.report import load, render
from pulsarlab.report.aggregate import aggregate
from tests import report_runs

runner = CliRunner()


def banner(html: str) -> str:
    return re.search(r'<div class="banner [^"]+" id="verdict-banner">(.*?)</div>', html, re.S).group(0)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report_runs.write_run(tmp_path_factory.mktemp("report") / "run", verdict=None, scenario=True)


def test_without_a_verdict_the_page_says_so_and_never_pass(run: Path) -> None:
    html = render(load(run))
    assert "NO VERDICT: this run has not been verified" in banner(html)
    assert 'class="banner missing"' in html
    assert not re.search(r"verdict: *pass", html, re.I)
    assert "<title>pulsarlab report: r1 (missing)</title>" in html
    assert f"pulsarlab verify {run}" in html


def test_the_verdict_table_shows_every_check_and_a_failure_loudly(run: Path, tmp_path: Path) -> None:
    report_runs.write_verdict(run, "pass")
    try:
        html = render(load(run))
        assert "verdict: PASS" in banner(html) and 'class="banner pass"' in html
        checks = json.loads((run / "verdict.json").read_text())["checks"]
        assert len(re.findall(r'<td class="ok">ok</td>', html)) == len(checks)
        assert "longest_gap_without_ack_s.seconds" in html
        report_runs.write_verdict(run, "fail")
        html = render(load(run))
        assert "verdict: FAIL" in banner(html)
        assert re.search(r"<td>lost</td><td class=\"num\">3</td>\s*<td class=\"bad\">FAIL</td>", html)
        assert "&#34;seq&#34;: 41" in html  # the first example, escaped
        report_runs.write_verdict(run, "inconclusive")
        html = render(load(run))
        assert "verdict: INCONCLUSIVE" in banner(html) and 'class="banner inconclusive"' in html
        assert "inconclusive: no scan of partition 0 on eu" in html
    finally:
        (run / "verdict.json").unlink()


def test_a_verdict_about_another_directory_or_older_than_the_history_is_flagged(run: Path, tmp_path: Path) -> None:
    report_runs.write_verdict(run, "pass", judged=tmp_path / "elsewhere")
    try:
        verdict = run / "verdict.json"
        os.utime(verdict, (1, 1))
        warnings = load(run).verdict_warnings
        assert any("elsewhere" in w and "not " + str(run) in w for w in warnings)
        assert any("older than the history" in w for w in warnings)
        assert "older than the history" in render(load(run))
    finally:
        (run / "verdict.json").unlink()


def test_faults_and_the_scenario_verdict_are_shown(run: Path) -> None:
    html = render(load(run))
    faults = re.search(r'<table id="faults">.*?</table>', html, re.S).group(0)
    assert faults.count("<tr>") == 3 and "kill pulsar1-eu" in faults and "started pulsar1-eu" in faults
    assert "7.00" in faults and "2023-11-14 22:13:28.000 UTC" in faults  # 8 s after the workload, 7 s after the first send
    assert html.count('"text":"kill pulsar1-eu"') == 4  # a labelled line on each figure, both rows of the rates'
    assert "<h2>Scenario</h2>" in html
    assert re.search(r"<td>lost == 0</td>\s*<td class=\"num\">0</td>\s*<td class=\"ok\">pass</td>", html)
    assert re.search(r"<td>rto_s &lt; 2</td>\s*<td class=\"num\">4.000</td>\s*<td class=\"bad\">FAIL</td>", html)
    assert "first_ok_after_fault_s" in html and "r1-p0" in html
    assert re.search(r"<td>longest window without ack &lt;= 10s</td>.*?<td class=\"bad\">FAIL</td>\s*</tr>", html, re.S)
    assert 'class="banner scenario pass" id="scenario-banner">scenario: PASS' in html
    assert html.index("<h2>Latency</h2>") < html.index("<h2>Scenario</h2>")  # the plots first, then the tables


def test_a_fault_that_failed_is_shown_as_an_error(tmp_path: Path) -> None:
    run = report_runs.write_run(tmp_path / "run", faults=False)
    began = report_runs.T0 + 4 * report_runs.NS
    FaultJournal(run).append(FaultRow(0, "partition", ("eu", "us"), (), "applied", 3.0, began, began, "error",
                                      error="needs root"))
    loaded = load(run)
    assert [f.fault for f in loaded.faults] == ["partition eu us"]
    assert loaded.fault_errors == ["partition eu us at 3.0s: needs root"]
    html = render(loaded)
    assert "fault error: partition eu us at 3.0s: needs root" in html and "failed: needs root" in html


def test_without_faults_there_is_no_fault_section_and_every_plot_spans_the_run(tmp_path: Path) -> None:
    html = render(load(report_runs.write_run(tmp_path / "run", faults=False)))
    assert "<h2>Faults</h2>" not in html and "kill pulsar1-eu" not in html
    assert html.count('"range":[0.0,20.0]') == 4  # from the first send, 20 one-second bins on every x axis (rates: two)


def test_the_page_is_self_contained(run: Path) -> None:
    html = render(load(run))
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html)
    assert "Plotly.newPlot" in html and len(html) > 3_000_000  # plotly.js is inside


def test_report_command_writes_the_page_and_prints_its_path(run: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(run / "report.html")
    assert (run / "report.html").stat().st_size > 3_000_000
    out = tmp_path / "page.html"
    result = runner.invoke(app, ["report", str(run), "--out", str(out)])
    assert result.exit_code == 0 and result.stdout.strip() == str(out) and out.exists()
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(("args", "code", "says"), [
    (["report"], 2, "Missing argument"),
    (["report", "{tmp}/absent"], 2, "no run directory: {tmp}/absent"),
    (["report", "{tmp}"], 1, "no history in {tmp}: no Parquet parts or driver journals"),
    (["report", "{run}", "--out", "{tmp}/no/such/dir/r.html"], 2, "no directory for the report: {tmp}/no/such/dir"),
    (["report", "{run}", "--verdict", "{tmp}/v.json"], 2, "no verdict file: {tmp}/v.json"),
])
def test_bad_input_is_one_line_and_a_documented_exit_code(run: Path, tmp_path: Path, args, code, says) -> None:
    fill = {"tmp": str(tmp_path), "run": str(run)}
    result = runner.invoke(app, [a.format(**fill) for a in args])
    assert result.exit_code == code, result.output
    assert says.format(**fill) in result.stderr
    assert "Traceback" not in result.output


def test_unreadable_side_files_name_the_file(tmp_path: Path) -> None:
    run = report_runs.write_run(tmp_path / "run", verdict=None, faults=False)
    (run / FAULTS_FILE).write_text("not parquet")
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 1 and f"unreadable {run / FAULTS_FILE}" in result.stderr
    (run / FAULTS_FILE).unlink()
    (run / "verdict.json").write_text("{not json")
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 1 and f"unreadable {run / 'verdict.json'}" in result.stderr


def test_several_directories_are_one_history_and_need_their_own_verdict(tmp_path: Path) -> None:
    a = report_runs.write_run(tmp_path / "a", verdict=None, faults=False)
    b = report_runs.write_run(tmp_path / "b", verdict=None, faults=True, run="r2")
    both = load([a, b])
    assert both.verdict is None and both.verdict_path is None and len(both.faults) == 2
    assert aggregate(both.events, both.started_ns).rates.counts[("sent", "eu")].tolist() == [0] + [80] * 20
    html = render(both)
    assert "<title>pulsarlab report: r1 + r2 (missing)</title>" in html and f"pulsarlab verify {a} {b} --out FILE" in html
    assert html.count("<td>r2</td>") == 2  # the drivers table says which run each driver belongs to
    report_runs.write_verdict(a, "pass")
    verdict = a / "verdict.json"
    assert any(f"not {a}, {b}" in w for w in load([a, b], verdict).verdict_warnings)  # it judged a alone
    json_verdict = json.loads(verdict.read_text())
    verdict.write_text(json.dumps({**json_verdict, "directories": [str(a), str(b)]}))
    assert load([a, b], verdict).verdict_warnings == []
    result = runner.invoke(app, ["report", str(a), str(b), "--verdict", str(verdict)])
    assert result.exit_code == 0 and result.stdout.strip() == str(a / "report.html")
    assert "verdict: PASS" in banner((a / "report.html").read_text())


def test_a_rolling_fault_shows_each_node_window(tmp_path: Path) -> None:
    run = report_runs.write_run(tmp_path / "run", faults=False)
    at = report_runs.T0 + 2 * report_runs.NS
    windows = (NodeWindow("bk1", at, at + 3 * report_runs.NS), NodeWindow("pulsar1", at + 4 * report_runs.NS,
                                                                         at + int(6.5 * report_runs.NS)))
    FaultJournal(run).append(FaultRow(0, "upgrade", ("4.0.8",), ("bk1", "pulsar1"), "applied", 1.0, at,
                                      at + 7 * report_runs.NS, "ok", "upgraded 2 node(s)", parts=windows))
    html = render(load(run))
    table = re.search(r'<table class="windows">.*?</table>', html, re.S).group(0)
    assert "upgrade 4.0.8" in table and table.count("<td>bk1</td>") == 1 and table.count("<td>pulsar1</td>") == 1
    assert ">3.00<" in table and ">2.50<" in table
