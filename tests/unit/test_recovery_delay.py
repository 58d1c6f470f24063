"""The upgrade's recovery-delay helper (``roles/pulsar_node/files/recovery_delay.py``) against a
bookie HTTP API served here: ``raise`` uses the first peer that answers (one that does not is
passed over), reports the delay it had, sets the new one and turns ledger replication off;
no peer answering is reported, not an error; ``restore`` puts the old value back and replication
on, and a value equal to the raised one (left by an interrupted run) becomes 0. Replication the
operator had turned off stays off."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http_served import Hangups, QuietHandler, served

SCRIPT = Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "pulsar_node" / "files" / "recovery_delay.py"
DEAD = "http://127.0.0.1:9"  # the discard port: nothing answers


@pytest.fixture
def bookie() -> Iterator[tuple[str, dict[str, int], Hangups]]:
    state = {"delay": 60, "replicating": True}
    hangups = Hangups(0)  # PUTs closed without a response

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/api/v1/autorecovery/status"):
                self._send(json.dumps({"enabled": state["replicating"]}))
            else:
                self._send(f"lostBookieRecoveryDelay value: {state['delay']}")

        def do_PUT(self) -> None:
            if hangups.hang_up(self):
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.startswith("/api/v1/autorecovery/status?enabled="):
                state["replicating"] = self.path.endswith("=true")
                self._send(json.dumps({"enabled": state["replicating"]}))
                return
            state["delay"] = int(json.loads(body)["delay_seconds"])
            self._send("Success")

        def _send(self, body: str) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())


    with served(Handler) as url:
        yield url, state, hangups


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_raise_goes_through_the_first_peer_that_answers_and_restore_puts_the_old_value_back(bookie) -> None:
    url, state, _ = bookie
    raised = run("raise", "300", DEAD, url)
    assert raised.returncode == 0 and json.loads(raised.stdout) == {"url": url, "before": 60, "paused": True}
    assert state == {"delay": 300, "replicating": False}
    restored = run("restore", "300", url, "60", "true")
    assert restored.returncode == 0 and state == {"delay": 60, "replicating": True}


def test_replication_the_operator_turned_off_stays_off_and_one_left_off_by_an_interrupted_run_comes_back(bookie) -> None:
    url, state, _ = bookie
    state["replicating"] = False
    raised = run("raise", "300", url)
    assert json.loads(raised.stdout)["paused"] is False  # not ours to turn on
    assert run("restore", "300", url, "60", "false").returncode == 0
    assert state == {"delay": 60, "replicating": False}
    state["delay"] = 300  # both switches as an interrupted run leaves them
    raised = run("raise", "300", url)
    assert json.loads(raised.stdout) == {"url": url, "before": 300, "paused": True}
    assert run("restore", "300", url, "300", "true").returncode == 0
    assert state == {"delay": 0, "replicating": True}


@pytest.mark.parametrize("before", ["300", "None", ""])
def test_restore_of_a_value_left_by_an_interrupted_run_or_unknown_is_the_rendered_zero(bookie, before: str) -> None:
    url, state, _ = bookie
    state["delay"] = 300
    assert run("restore", "300", url, *([before] if before else [])).returncode == 0
    assert state["delay"] == 0


def test_no_peer_answering_is_reported_and_changes_nothing() -> None:
    raised = run("raise", "300", DEAD)
    assert raised.returncode == 0 and json.loads(raised.stdout) == {"url": "", "before": None, "paused": False}


def test_bad_arguments_exit_2_with_the_usage() -> None:
    bad = run("lower", "1")
    assert bad.returncode == 2 and "recovery_delay.py raise" in bad.stderr


def test_a_peer_that_closes_the_write_is_passed_over_and_restore_asks_again(bookie, tmp_path) -> None:
    """A peer that answers the read but closes the connection on the write does not fail the raise
    (the next peer is used), and a restore whose first writes are closed goes through on a later one."""
    url, state, hangups = bookie
    hangups.left = 1
    raised = run("raise", "300", url, url)  # the same peer twice: its second write goes through
    assert raised.returncode == 0 and json.loads(raised.stdout) == {"url": url, "before": 60, "paused": True}
    assert state == {"delay": 300, "replicating": False}
    spec = importlib.util.spec_from_file_location("recovery_delay_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    rd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rd)
    hangups.left = 2
    assert rd.restore(url, 60, attempts=3, sleep=0.05) is None and state["delay"] == 60
    hangups.left = 5
    error = rd.restore(url, 0, attempts=2, sleep=0.05)
    assert error is not None and "Remote end closed connection without response" in error and state["delay"] == 60
