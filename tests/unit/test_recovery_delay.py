"""The upgrade's recovery-delay helper (``roles/pulsar_node/files/recovery_delay.py``) against a
bookie HTTP API served here: ``raise`` uses the first peer that answers (one that does not is
passed over), reports the delay it had and sets the new one; no peer answering is reported, not
an error; ``restore`` puts the old value back, and a value equal to the raised one (left by an
interrupted run) becomes 0."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http_served import QuietHandler, served

SCRIPT = Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "pulsar_node" / "files" / "recovery_delay.py"
DEAD = "http://127.0.0.1:9"  # the discard port: nothing answers


@pytest.fixture
def bookie() -> Iterator[tuple[str, dict[str, int]]]:
    state = {"delay": 60}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self._send(f"lostBookieRecoveryDelay value: {state['delay']}")

        def do_PUT(self) -> None:
            state["delay"] = int(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["delay_seconds"])
            self._send("Success")

        def _send(self, body: str) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())


    with served(Handler) as url:
        yield url, state


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_raise_goes_through_the_first_peer_that_answers_and_restore_puts_the_old_value_back(bookie) -> None:
    url, state = bookie
    raised = run("raise", "300", DEAD, url)
    assert raised.returncode == 0 and json.loads(raised.stdout) == {"url": url, "before": 60}
    assert state["delay"] == 300
    restored = run("restore", "300", url, "60")
    assert restored.returncode == 0 and state["delay"] == 60


@pytest.mark.parametrize("before", ["300", "None", ""])
def test_restore_of_a_value_left_by_an_interrupted_run_or_unknown_is_the_rendered_zero(bookie, before: str) -> None:
    url, state = bookie
    state["delay"] = 300
    assert run("restore", "300", url, *([before] if before else [])).returncode == 0
    assert state["delay"] == 0


def test_no_peer_answering_is_reported_and_changes_nothing() -> None:
    raised = run("raise", "300", DEAD)
    assert raised.returncode == 0 and json.loads(raised.stdout) == {"url": "", "before": None}


def test_bad_arguments_exit_2_with_the_usage() -> None:
    bad = run("lower", "1")
    assert bad.returncode == 2 and "recovery_delay.py raise" in bad.stderr
