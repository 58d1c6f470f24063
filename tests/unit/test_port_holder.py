"""Starting a node whose port is held: by the node's own previous JVM of this deployment, still
closing after it stopped by itself, the start waits for the port; by any other process, it is
refused at once, the error naming the process that holds the port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pulsarlab.errors import PortInUseError
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.topology import Node, Role

ADDRESS = "127.0.77.7"
LISTEN = ("import socket, sys, time; s = socket.socket(); s.bind(({a!r}, {p})); s.listen(); "
          "print('up', flush=True); time.sleep(float(sys.argv[1]))")


def free_port() -> int:
    """A port of its own for each test (tests run side by side under xdist)."""
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return s.getsockname()[1]


PORT = free_port()


def listener(hold_s: float, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LISTEN.format(a=ADDRESS, p=PORT), str(hold_s), *args],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    return proc


def runtime(state_dir: Path) -> SimpleNamespace:
    node = Node(name="bk1", role=Role.BOOKIE, region="r1", address=ADDRESS, ports={"bookie": PORT})
    topo = SimpleNamespace(endpoints=lambda: [(node, ADDRESS, PORT)])
    rt = SimpleNamespace(state_dir=state_dir, say=lambda *a, **k: None, topo=topo)
    rt._own_previous_jvm = lambda n, proc: NodeRuntime._own_previous_jvm(rt, n, proc)  # type: ignore[arg-type]
    rt.wait_ports_released = lambda n: NodeRuntime.wait_ports_released(rt, n)  # type: ignore[arg-type]
    return rt


def test_the_nodes_own_closing_jvm_is_waited_for(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    proc = listener(1.5, "-Dpulsarlab.node=bk1", f"-Dpulsar.log.dir={tmp_path}/nodes/bk1/logs")
    try:
        t0 = time.monotonic()
        NodeRuntime.check_ports(rt, [rt.topo.endpoints()[0][0]])  # type: ignore[arg-type]
        assert 0.5 < time.monotonic() - t0 < 10
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("args", [("-Dpulsarlab.node=bk1", "-Dpulsar.log.dir=/elsewhere/logs"),
                                  ("-Dpulsarlab.node=bk2",), ()], ids=["another deployment", "another node", "not a node"])
def test_any_other_holder_is_refused_at_once_and_named(tmp_path: Path, args: tuple[str, ...]) -> None:
    rt = runtime(tmp_path)
    proc = listener(60, *args)
    try:
        t0 = time.monotonic()
        said = rf"port in use: {ADDRESS}:{PORT} \(needed by node bk1, held by pid {proc.pid}: "
        with pytest.raises(PortInUseError, match=said):
            NodeRuntime.check_ports(rt, [rt.topo.endpoints()[0][0]])  # type: ignore[arg-type]
        assert time.monotonic() - t0 < 3
    finally:
        proc.kill()
        proc.wait()
