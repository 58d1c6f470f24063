"""A real workload on the smoke cluster leaves a history the verifier finds clean."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.workload.history import read_history

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
