"""The CLI's edges without a JVM: idempotent down, one-line errors with documented exit codes,
URLs as environment variables, and node logs read through the deployment contract."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.cli.handler import ERROR_LOG
from pulsarlab.runtime import open_deployment
from tests.interrupt import default_sigint

runner = CliRunner()


@pytest.fixture
def stopped(tmp_path: Path) -> Path:
    """A state directory of a smoke cluster whose nodes are not running."""
    state = tmp_path / "state"
    assert runner.invoke(app, ["render", "--topology", "smoke", "--out", str(state)]).exit_code == 0
    (state / "state.json").write_text(json.dumps({"name": "smoke", "runtime": "local", "topology_ref": "smoke"}))
    return state


def stamp(seconds_ago: float) -> str:
    t = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    return t.strftime("%Y-%m-%dT%H:%M:%S,") + f"{t.microsecond // 1000:03d}+0000"


def test_down_with_nothing_running_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .pulsarlab/ here
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 0, result.output
    assert "nothing to stop" in result.stdout
    result = runner.invoke(app, ["down", "--state-dir", str(tmp_path / "never-used")])
    assert result.exit_code == 0 and "nothing to stop" in result.stdout


def test_down_of_a_cluster_whose_nodes_are_gone_clears_its_state(stopped: Path) -> None:
    result = runner.invoke(app, ["down", "--state-dir", str(stopped)])
    assert result.exit_code == 0, result.output
    assert "nothing to stop: no node was running" in result.stdout
    assert not (stopped / "state.json").exists()


@pytest.mark.parametrize("args, says", [
    (["up", "--runtime", "nope"], "unknown runtime 'nope'"),
    (["workload", "run", "--out", "x", "--subscription-type", "fanout"], "subscription type must be one of"),
    (["env", "--format", "yaml"], "'yaml' is not one of 'shell', 'json', 'dotenv'"),
    (["logs", "--lines", "-3", "pulsar1"], "Invalid value for '--lines' / '-n': Input should be greater than or equal to 0"),
    (["logs"], "give one NODE, or --all"),
])
def test_a_bad_option_value_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 6 and "Traceback" not in result.output  # click boxes the message
    assert isinstance(result.exception, SystemExit)


def test_a_malformed_expectations_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    expect = tmp_path / "expect.yaml"
    expect.write_text("allow: [lost\n")
    result = runner.invoke(app, ["verify", str(history), "--expect", str(expect)])
    assert result.exit_code == 2, result.output
    assert f"expectations file {expect}" in result.stderr
    assert "Traceback" not in result.output


def test_an_unexpected_error_is_one_line_naming_its_type_and_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pulsarlab import ops

    def broken(_state_dir: object) -> dict:  # a bug deep inside a command: what the user sees of it
        raise json.JSONDecodeError("Expecting value", "{", 1)

    monkeypatch.setattr(ops, "status", broken)
    result = runner.invoke(app, ["status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: JSONDecodeError: ")
    assert len(result.stderr.strip().splitlines()) == 1 and str(ERROR_LOG) in result.stderr
    assert "Traceback" in ERROR_LOG.read_text()
    result = runner.invoke(app, ["status", "--json", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "JSONDecodeError" and error["exit_code"] == 1 and error["log"] == str(ERROR_LOG)


def test_a_pulsarlab_error_with_json_is_a_json_object(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "--json", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["type"] == "StateError"


def test_exit_codes_are_in_help() -> None:
    def help_of(*args: str) -> str:
        return " ".join(runner.invoke(app, [*args, "--help"]).stdout.split())

    assert "2 usage or bad input" in help_of() and "3 inconclusive" in help_of()
    assert "1 some node is not ready" in help_of("status")
    assert "1 a placement flag" in help_of("inspect", "placement")


def test_env_names_every_cluster_and_writes_client_conf(stopped: Path) -> None:
    result = runner.invoke(app, ["env", "--state-dir", str(stopped)])
    assert result.exit_code == 0, result.output
    exported = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in result.stdout.splitlines())
    assert exported["PULSAR_SERVICE_URL"] == exported["PULSAR_SERVICE_URL_SMOKE"] == "pulsar://127.0.1.5:6650"
    assert exported["PULSAR_ADMIN_URL"] == "http://127.0.1.5:8080"
    conf = Path(exported["PULSAR_CLIENT_CONF"]).read_text()
    assert "webServiceUrl=http://127.0.1.5:8080\n" in conf and "brokerServiceUrl=pulsar://127.0.1.5:6650\n" in conf
    as_json = json.loads(runner.invoke(app, ["env", "--format", "json", "--state-dir", str(stopped)]).stdout)
    assert as_json["PULSAR_CLIENT_CONF"] == exported["PULSAR_CLIENT_CONF"]
    dotenv = runner.invoke(app, ["env", "--format", "dotenv", "--state-dir", str(stopped)]).stdout
    assert "PULSAR_SERVICE_URL=pulsar://127.0.1.5:6650" in dotenv.splitlines()
    bad = runner.invoke(app, ["env", "--cluster", "mars", "--state-dir", str(stopped)])
    assert bad.exit_code == 2 and "no cluster 'mars'" in bad.stderr


def test_logs_tail_since_and_all(stopped: Path) -> None:
    log = open_deployment(stopped).log_file("pulsar1")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"{stamp(600)} [main] INFO old - starting\n  at a stack frame of the old line\n"
                   f"{stamp(5)} [main] INFO new - ready\n  at a stack frame of the new line\n")
    result = runner.invoke(app, ["logs", "pulsar1", "--lines", "1", "--state-dir", str(stopped)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "  at a stack frame of the new line\n"
    recent = runner.invoke(app, ["logs", "pulsar1", "--since", "60", "--state-dir", str(stopped)]).stdout
    assert "new - ready" in recent and "stack frame of the new" in recent and "old" not in recent
    every = runner.invoke(app, ["logs", "--all", "--since", "60", "--state-dir", str(stopped)])
    assert every.stdout.splitlines()[0].startswith("pulsar1 | ") and "old" not in every.stdout
    # the nodes that never started here have no log: named, and the exit code says so
    assert every.exit_code == 1 and "no log yet (not started here): zk (" in every.stderr, every.stderr
    assert "pulsar1" not in every.stderr
    never = runner.invoke(app, ["logs", "bk1", "--state-dir", str(stopped)])
    assert never.exit_code == 1 and "no log of bk1 yet" in never.stderr and never.stdout == ""
    missing = runner.invoke(app, ["logs", "bk9", "--state-dir", str(stopped)])
    assert missing.exit_code == 1 and "no node 'bk9'" in missing.stderr


def test_logs_follow_prints_what_is_appended(stopped: Path) -> None:
    log = open_deployment(stopped).log_file("bk1")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("before\n")

    def append() -> None:
        time.sleep(0.6)  # deliberate: appended once `logs -f` has printed what was there
        with open(log, "a") as fh:
            fh.write("appended while following\n")

    writer = threading.Thread(target=append)
    writer.start()
    start = time.monotonic()
    result = runner.invoke(app, ["logs", "bk1", "-f", "--follow-for", "2", "--state-dir", str(stopped)])
    writer.join()
    assert result.exit_code == 0, result.output
    assert result.stdout == "before\nappended while following\n"
    assert 1.9 < time.monotonic() - start < 10


def test_logs_follow_ends_at_ctrl_c_with_exit_0(stopped: Path) -> None:
    log = open_deployment(stopped).log_file("zk")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("the last line so far\n")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "pulsarlab.cli", "logs", "zk", "-f", "--state-dir", str(stopped)],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        assert proc.stdout.readline() == "the last line so far\n"
        time.sleep(0.5)  # deliberate: Ctrl-C while it follows, not before
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_verify_on_a_folder_that_is_no_history_is_a_usage_error_before_spark(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not a history")
    scenario_out = tmp_path / "runs"  # as 'scenario run --out' leaves it: one history per folder
    (scenario_out / "sync-bookie-loss").mkdir(parents=True)
    (scenario_out / "sync-bookie-loss" / "_run.json").write_text("{}")
    for folder, says in ((empty, "is not a run history"), (tmp_path / "other", "is not a run history"),
                         (scenario_out, f"give each folder, e.g. {scenario_out / 'sync-bookie-loss'}")):
        started = time.monotonic()
        result = runner.invoke(app, ["verify", str(folder)])
        assert result.exit_code == 2, result.output
        assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert time.monotonic() - started < 10  # no JVM was started
        assert not (folder / "spark.log").exists() and not (folder / "verdict.json").exists()


@pytest.mark.parametrize("doc, says", [
    ({"allow": ["lsot"]}, "unknown check(s) in allow: lsot"),
    ({"forbid_only": ["lost", "duplicated"]}, "unknown check(s) in forbid_only: duplicated"),
    ({"allow": "lost"}, "allow must be a list of check names"),
])
def test_an_expectation_naming_no_known_check_is_an_error(doc: dict, says: str, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps(doc))
    result = runner.invoke(app, ["verify", str(history), "--expect", str(expect)])
    assert result.exit_code == 2, result.output
    assert says in result.stderr, result.stderr
    assert "known: lost, " in result.stderr or "unknown" not in says  # the right names are offered


@pytest.mark.parametrize("args", [["topologies"], ["--help"]])
def test_output_whose_reader_went_away_ends_the_command_quietly_with_the_pipe_signals_status(args: list[str]) -> None:
    """``pulsarlab ... | head`` once head has gone: no traceback, no error line, the status a shell
    gives a command that SIGPIPE ended (141), not 1, which means a failed check."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "pulsarlab.cli", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    assert done.stderr == ""


def test_a_write_to_a_child_that_exited_raises_where_it_is_made_instead_of_ending_the_command() -> None:
    """The command's own process keeps SIGPIPE ignored: a write to a child gone a moment before (a
    workload driver told to stop after a second Ctrl-C) raises BrokenPipeError, which the writer
    handles, where the signal's default action killed the whole command (status -13)."""
    script = (
        "import atexit, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'pass'], stdin=subprocess.PIPE)\n"
        "child.wait()\n"
        "def write():\n"
        "    try:\n"
        "        child.stdin.write(b'stop\\n' * 20000); child.stdin.flush()\n"
        "    except BrokenPipeError:\n"
        "        print('raised where written')\n"
        "atexit.register(write)\n"
        "sys.argv = ['pulsarlab', 'topologies']\n"
        "from pulsarlab.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "raised where written" in done.stdout
