"""Crash and teardown on the smoke cluster: `up` after every JVM was killed brings the same data
back; `down` leaves no process of the cluster behind (and each role's class archive); `up`
afterwards starts clean, every JVM mapping its archive."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psutil
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.runtime.cds import class_archives
from pulsarlab.runtime.local import LocalCluster
from tests.cluster.test_smoke import consume_all, produce

runner = CliRunner()


def _pids(cluster: LocalCluster) -> list[int]:
    return [rec.pid for rec in LocalCluster.open(cluster.state_dir).state.nodes.values()]


def test_up_after_every_node_crashed_keeps_acknowledged_messages(smoke: LocalCluster) -> None:
    topic = f"persistent://smoke/test/crash-{uuid.uuid4().hex[:8]}"
    sent = produce(smoke, topic, 300, "c")
    before = _pids(smoke)
    for pid in before:  # a power cut: every JVM at once, no chance to shut down
        psutil.Process(pid).kill()
    psutil.wait_procs([psutil.Process(p) for p in before if psutil.pid_exists(p)], timeout=30)

    result = runner.invoke(app, ["up", "--topology", str(smoke.state_dir / "topology.yaml"), "--state-dir", str(smoke.state_dir)])
    assert result.exit_code == 0, result.output
    assert "ready" in result.stdout and "already running" not in result.stdout
    after = _pids(smoke)
    assert len(after) == 5 and not set(after) & set(before)
    smoke.state = LocalCluster.open(smoke.state_dir).state
    assert sorted(consume_all(smoke, topic, len(sent))) == sorted(sent)


def test_down_leaves_no_process_and_up_starts_clean(smoke: LocalCluster) -> None:
    pids = _pids(smoke)
    result = runner.invoke(app, ["down", "--state-dir", str(smoke.state_dir)])
    assert result.exit_code == 0, result.output
    assert "stopped 5 nodes" in result.stdout
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not list(smoke.state_dir.glob("nodes/*/data/*")), "down without --keep-data wipes the data"
    archives = class_archives(smoke.distribution())
    roles = {n.role.value for n in smoke.topo.nodes}
    # a clean stop left each role's class archive (recorded now, or by an earlier cluster)
    assert all(archives.archive(r).stat().st_size > 1_000_000 for r in [*roles, "init"])

    result = runner.invoke(app, ["up", "--topology", str(smoke.state_dir / "topology.yaml"), "--state-dir", str(smoke.state_dir)])
    assert result.exit_code == 0, result.output
    status = json.loads(runner.invoke(app, ["status", "--json", "--state-dir", str(smoke.state_dir)]).stdout)
    assert all(n["ready"] for n in status["nodes"])
    smoke.state = LocalCluster.open(smoke.state_dir).state
    for node in smoke.topo.nodes:  # and every JVM maps its role's archive instead of loading classes anew
        maps = Path(f"/proc/{smoke.state.nodes[node.name].pid}/maps").read_text()
        assert str(archives.archive(node.role.value)) in maps, node.name
