"""A real workload on the smoke cluster leaves a history the verifier finds clean."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.compute as pc
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.history import read_history
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.workload.driver import DriverProcess, driver_classes

runner = CliRunner()


def test_workload_history_verifies_clean(smoke: LocalCluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, [
        "workload", "run", "--out", str(out), "--state-dir", str(smoke.state_dir),
        "--topic", "persistent://smoke/test/wl-clean", "--partitions", "2",
        "--producers", "2", "--consumers", "2", "--subscription-type", "key_shared",
        "--rate", "400", "--duration", "4", "--keys", "20",
    ])
    assert result.exit_code == 0, result.output
    history = read_history(out)
    ops = history.column("op")
    sends_ok = pc.sum(pc.and_(pc.equal(ops, "send"), pc.equal(history.column("type"), "ok"))).as_py()
    assert sends_ok > 1000
    assert pc.sum(pc.equal(ops, "read")).as_py() == sends_ok
    assert pc.sum(pc.equal(ops, "receive")).as_py() >= sends_ok

    result = runner.invoke(app, ["verify", str(out), "--json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is True
    counts = {c["name"]: c["count"] for c in verdict["checks"]}
    for check in ("lost", "duplicated_in_storage", "duplicated_delivery", "unexpected", "never_delivered"):
        assert counts[check] == 0, (check, verdict)
    assert (out / "verdict.json").is_file()


def test_a_killed_producer_keeps_what_it_had_recorded(smoke: LocalCluster, tmp_path: Path) -> None:
    """SIGKILL a producer driver mid-run: its journal is salvaged into a part with at most the last
    half second of events missing, and every acknowledged send in it names its message id."""
    dist = smoke.distribution()
    topic = "persistent://smoke/test/wl-killed"
    config = {"service_url": smoke.topo.service_url("smoke"), "topic": topic, "producer_name": "killed-p0", "rate": 2000,
              "message_size": 100, "keys": 10}
    d = DriverProcess("p0", "produce", tmp_path, "producer-p0", config, {"producer": "p0", "topic": topic, "cluster": "smoke"})
    d.start(dist, driver_classes(dist))
    try:
        assert d.ready.wait(60), d.log_tail()
        d.tell(f"start {time.time_ns() // 1_000_000 + 60_000}")
        deadline = time.monotonic() + 60
        while d.counts["acked"] < 3000:
            assert time.monotonic() < deadline and d.alive, (d.counts, d.log_tail())
            time.sleep(0.05)
        acked_before_kill = d.counts["acked"]
    finally:
        d.kill()
    history = read_history(tmp_path)
    ok = history.filter(pc.equal(history.column("type"), "ok"))
    invoked = history.filter(pc.equal(history.column("type"), "invoke")).column("seq").to_pylist()
    assert acked_before_kill - 1500 <= ok.num_rows  # 2000 msg/s, flushed every 0.5 s
    assert invoked == list(range(len(invoked)))
    assert set(ok.column("seq").to_pylist()) <= set(invoked)
    assert ok.column("message_id").null_count == 0
    assert not list(tmp_path.glob("*.events"))
