"""What an operator sees: progress in a pseudo-terminal, nothing of it in a pipe, JSON unmixed.

One smoke cluster of its own (it must start to show nodes starting), at the lane's addresses; the
pool's cluster is taken down first, as it would hold the same ports.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pulsarlab.topology import BUILTIN_DIR
from tests.cluster.handmade import handmade_history
from tests.topology_files import builtin_at

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|[@-_])")
SMOKE_NODES = ("zk", "bk1", "bk2", "bk3", "pulsar1")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "CI")}
    return {**env, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"}


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from pulsarlab.cli import main; main()", *args]


def in_terminal(*args: str, timeout: float = 600) -> tuple[int, str]:
    """Run pulsarlab with stdin, stdout and stderr on a pseudo-terminal; (exit code, all it wrote)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(_cmd(*args), stdin=slave, stdout=slave, stderr=slave, env=_env(), cwd=ROOT, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal (EIO)
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            pytest.fail(f"pulsarlab {' '.join(args)} still running after {timeout:.0f}s in the terminal")
        code = proc.wait(timeout=60)
    finally:
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def piped(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(*args), capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def lane(cluster_pool, tmp_path_factory) -> tuple[Path, Path]:
    """(topology file at this lane's addresses, state dir); the cluster is taken down at the end."""
    cluster_pool.close()  # the pool's cluster would hold the same addresses and ports
    folder = tmp_path_factory.mktemp("terminal")
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")
    topo = builtin_at("smoke", prefix, folder) if prefix else BUILTIN_DIR / "smoke.yaml"
    state = folder / "state"
    yield topo, state
    piped("down", "--state-dir", str(state))


def test_up_shows_each_node_from_starting_to_ready_in_a_terminal_and_nothing_in_a_pipe(lane) -> None:
    topo, state = lane
    t0 = time.monotonic()
    code, shown = in_terminal("up", "--topology", str(topo), "--state-dir", str(state))
    text = ANSI.sub("", shown)
    assert code == 0, text[-3000:]
    assert "\x1b[" in shown  # a live display, redrawn in place
    for node in SMOKE_NODES:
        assert re.search(rf"{node}\s+(starting|started)", text), f"{node} never shown starting:\n{text[-3000:]}"
        assert re.search(rf"{node}\s+ready \(\d+\.\ds\)", text), f"{node} never shown ready:\n{text[-3000:]}"
    assert re.search(r"configure over the admin REST API\s+configured \(\d+\.\ds\)", text), text[-3000:]
    assert "produced and consumed (" in text and "ready in " in text
    print(f"up in a terminal: {time.monotonic() - t0:.1f}s")

    # --json in a terminal: progress is left out, so what the terminal got is one JSON document
    code, shown = in_terminal("configure", "--dry-run", "--json", "--state-dir", str(state))
    assert code == 0, shown
    assert json.loads(shown.replace("\r\n", "\n"))["changes"] == []

    t1 = time.monotonic()
    down = piped("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == "stopped 5 nodes" and down.stderr == ""
    again = piped("up", "--topology", str(topo), "--state-dir", str(state))
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr == "", again.stderr  # no progress, no notes: results only
    assert "\x1b" not in again.stdout and "ready in " in again.stdout and "starting" not in again.stdout
    print(f"down and up in a pipe: {time.monotonic() - t1:.1f}s")

    code, shown = in_terminal("down", "--state-dir", str(state))
    text = ANSI.sub("", shown)
    assert code == 0, text
    for node in SMOKE_NODES:
        assert re.search(rf"{node}\s+stopped \(\d+\.\ds\)", text), f"{node} never shown stopped:\n{text}"
    assert "stopped 5 nodes" in text


def test_verify_shows_its_stages_and_no_spark_warning_in_a_terminal(tmp_path: Path) -> None:
    history = handmade_history(tmp_path / "run", lose=5)
    t0 = time.monotonic()
    code, shown = in_terminal("verify", str(history))
    text = ANSI.sub("", shown)
    assert code == 1, text  # one acknowledged message lost
    for stage in (r"Spark \(local\[\*\]\), its log in .*\s+ready \(", r"cross-checking the history's files\s+read \(",
                  r"checking 3 history part\(s\) of 1 producer\(s\) \(1 task\(s\), each judging whole producers\)\s+checked \("):
        assert re.search(stage, text), f"no stage {stage!r}:\n{text}"
    for chatter in ("WARN", "log4j", "NativeCodeLoader", "incubator", "setLogLevel"):
        assert chatter not in text, f"{chatter!r} reached the terminal:\n{text}"
    assert "lost, first example: " in text and "ok_ts=2027-01-15T08:00:00.503Z" in text
    log = (history / "spark.log").read_text()
    assert "NativeCodeLoader" in log or "log4j" in log  # Spark's own lines went to its log file
    print(f"verify in a terminal: {time.monotonic() - t0:.1f}s")
