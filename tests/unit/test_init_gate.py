"""The metadata initialisation is held back until ZooKeeper listens (pulsarlab.runtime.local.
hold_until_listening): a process that logs it is about to connect while nothing listens is frozen,
thawed when the port accepts, and never left frozen. The process here is a small client of our own
(it logs the initialisation's line, then connects once); the whole path runs in every fresh
local-runtime start of the cluster tier."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from pulsarlab.runtime.local import hold_until_listening

# the tool logs its first line some 0.1 s before its client connects; 2 s here, so that a loaded
# machine cannot make the client connect before the gate has read that line
CLIENT = """
import socket, sys, time
print("INFO org.apache.pulsar.PulsarClusterMetadataSetup - Setting up cluster c1", flush=True)
time.sleep(2)
s = socket.socket()
print("connected" if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else "refused", flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(tmp_path: Path, port: int) -> tuple[subprocess.Popen, Path]:
    log_path = tmp_path / "init.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", CLIENT, str(port)], stdout=log, stderr=subprocess.STDOUT)
    return proc, log_path


def _listening(port: int):
    def probe() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True
    return probe


def _frozen(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
                return True
        except psutil.NoSuchProcess:
            return False
        time.sleep(0.01)
    return False


def test_a_client_about_to_connect_waits_for_the_listener(tmp_path: Path) -> None:
    port = _free_port()
    proc, log_path = _start(tmp_path, port)
    gate = threading.Thread(target=hold_until_listening,
                            args=(proc, log_path, _listening(port), time.monotonic() + 30))
    gate.start()
    try:
        assert _frozen(proc.pid), "the client was not held while nothing listened"
        with socket.create_server(("127.0.0.1", port)) as server:
            gate.join(10)
            assert not gate.is_alive()
            assert proc.wait(10) == 0
            server.accept()[0].close()
    finally:
        proc.kill()
    assert log_path.read_text().splitlines()[-1] == "connected"


def test_the_client_is_thawed_when_the_wait_gives_up(tmp_path: Path) -> None:
    port = _free_port()
    proc, log_path = _start(tmp_path, port)
    started = time.monotonic()
    hold_until_listening(proc, log_path, _listening(port), time.monotonic() + 1.0)
    try:
        assert time.monotonic() - started >= 0.9
        assert proc.wait(10) == 0, "left frozen"
    finally:
        proc.kill()
    assert log_path.read_text().splitlines()[-1] == "refused"


def test_nothing_is_held_once_the_server_listens(tmp_path: Path) -> None:
    port = _free_port()
    with socket.create_server(("127.0.0.1", port)) as server:
        proc, log_path = _start(tmp_path, port)
        hold_until_listening(proc, log_path, _listening(port), time.monotonic() + 30)
        assert proc.wait(10) == 0
        server.accept()[0].close()
    assert log_path.read_text().splitlines()[-1] == "connected"
