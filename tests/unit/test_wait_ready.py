"""The playbooks' readiness wait (``roles/pulsar_node/files/wait_ready.py``): ready as soon as the
check answers, at once when the node's process is gone, and after its timeout otherwise; a failure
prints why and the tail of the node's newest log."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http_served import QuietHandler, served

SCRIPT = Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "pulsar_node" / "files" / "wait_ready.py"


def wait(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    return proc, time.monotonic() - t0


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    (tmp_path / "old.log").write_text("an older log\n")
    time.sleep(0.01)  # deliberate: broker.log is the newer of the two
    (tmp_path / "broker.log").write_text("".join(f"line {i}\n" for i in range(100)) + "java.net.BindException: in use\n")
    return tmp_path


@pytest.fixture
def node() -> Iterator[str]:
    """A process that carries a node's marker on its command line, as the node's JVM does."""
    name = f"n-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"-Dpulsarlab.node={name}"])
    try:
        yield name
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def ready_url() -> Iterator[str]:
    class Ready(QuietHandler):
        def do_GET(self) -> None:  # the standard library's name
            self.send_response(200 if self.path == "/admin/v2/brokers/ready" else 404)
            self.end_headers()

    with served(Ready) as url:
        yield f"{url}/admin/v2/brokers/ready"


def test_a_node_whose_process_is_gone_fails_at_once_with_its_log_tail(logs: Path) -> None:
    proc, took = wait(f"gone-{uuid.uuid4().hex[:8]}", "zookeeper", "127.0.0.1:9", "180", str(logs))
    assert proc.returncode == 1
    assert took < 10  # not the 180 s timeout
    assert "JVM exited before 127.0.0.1:9 answered ready" in proc.stderr
    assert "java.net.BindException: in use" in proc.stderr and "line 99" in proc.stderr
    assert "line 10\n" not in proc.stderr and "an older log" not in proc.stderr  # the newest log, its tail only


def test_a_running_node_that_never_answers_fails_after_the_timeout(node: str, logs: Path) -> None:
    proc, took = wait(node, "bookie", "http://127.0.0.1:9/api/v1/bookie/is_ready", "2", str(logs))
    assert proc.returncode == 1
    assert 2 <= took < 10
    assert "not ready after 2s (the JVM still runs)" in proc.stderr
    assert "java.net.BindException" in proc.stderr


def test_a_node_that_answers_is_ready(node: str, ready_url: str, logs: Path) -> None:
    proc, took = wait(node, "broker", ready_url, "30", str(logs))
    assert proc.returncode == 0, proc.stderr
    assert f"{node} (broker) ready in" in proc.stdout
    assert took < 5
