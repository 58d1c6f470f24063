"""Two handles of one local deployment: a node another handle started (a CLI command, a fault
schedule) is seen by the first one, which still holds the record of the process that is gone."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pulsarlab.runtime.local import LocalCluster
from pulsarlab.runtime.state import ClusterState, ProcessRecord
from pulsarlab.topology import load


def _record(proc: subprocess.Popen) -> ProcessRecord:
    return ProcessRecord(proc.pid, psutil.Process(proc.pid).create_time())


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_node_restarted_by_another_handle_is_alive_for_this_one(tmp_path: Path, sleeper: subprocess.Popen) -> None:
    topo = load("smoke")
    first = LocalCluster(topo, tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    first.state.nodes["bk1"] = ProcessRecord(gone.pid, 0.0)  # the process this handle started, since stopped
    first.state.save(tmp_path)
    assert not first.alive("bk1")

    second = LocalCluster(topo, tmp_path)
    second.state.nodes["bk1"] = _record(sleeper)  # started again through the other handle
    second.state.save(tmp_path)

    assert first.alive("bk1")
    assert first.process_info("bk1")[0] == sleeper.pid


def test_a_saved_record_of_a_dead_process_does_not_revive_the_node(tmp_path: Path) -> None:
    topo = load("smoke")
    gone = subprocess.Popen(["true"])
    gone.wait()
    ClusterState(topo.name, "local", topo.name, nodes={"bk1": ProcessRecord(gone.pid, 0.0)}).save(tmp_path)
    assert not LocalCluster(topo, tmp_path).alive("bk1")
