"""Built-in scenarios through the CLI, each on a fresh cluster of its own: the verdict a user gets
(exit code, RPO, RTO) for the blog's bookie and region losses, and a control that must see a loss."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.history.faults import FAULTS_FILE, read_faults
from pulsarlab.scenarios.model import BUILTIN_DIR
from pulsarlab.scenarios.verdict import SCENARIO_FILE
from pulsarlab.verify import VERDICT_FILE

runner = CliRunner()


@pytest.fixture
def no_pooled_cluster(cluster_pool) -> None:
    """A scenario starts its own cluster on the topology's addresses: the shared one goes first."""
    cluster_pool.close()


def scenario_ref(name: str, tmp_path: Path) -> str:
    """The built-in, moved to other loopback addresses when the tests run beside another cluster."""
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")
    if not prefix:
        return name
    data = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
    topo = data["topology"] if isinstance(data["topology"], dict) else {"ref": data["topology"]}
    data["topology"] = {**topo, "address_prefix": prefix}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def run(name: str, tmp_path: Path) -> tuple[int, dict, Path]:
    out = tmp_path / "runs"
    result = runner.invoke(app, ["scenario", "run", scenario_ref(name, tmp_path), "--json", "--out", str(out)])
    assert result.stdout.strip().startswith("{"), result.output  # JSON only on stdout, no progress mixed in
    verdict = json.loads(result.stdout)
    assert "error" not in verdict, verdict
    run_dir = out / name
    for f in (SCENARIO_FILE, FAULTS_FILE, VERDICT_FILE):
        assert (run_dir / f).is_file(), f
    assert json.loads((run_dir / SCENARIO_FILE).read_text())["status"] == verdict["status"]
    state = out / f"{name}.cluster"
    assert not (state / "state.json").exists(), "the scenario's cluster was left behind"
    return result.exit_code, verdict, run_dir


def test_sync_bookie_loss_loses_nothing_and_writes_keep_going(no_pooled_cluster, tmp_path: Path) -> None:
    code, v, run_dir = run("sync-bookie-loss", tmp_path)
    assert code == 0, json.dumps(v, indent=2)
    assert v["status"] == "pass" and v["rpo"] == 0 and v["checks"]["lost"] == 0
    assert [f["fault"] for f in v["faults"]] == ["kill bk1-eu", "start bk1-eu"]
    assert v["waits"][0]["held"]
    producers = v["rto"]["producers"]
    assert len(producers) == 2 and all(p["acked"] > 1000 for p in producers)
    for p in producers:  # the surviving eu bookie and the us copies keep writes going: seconds, not an outage
        kill = p["faults"][0]  # the start may end after the last send: then it has nothing to measure
        assert kill["sent_after"] and kill["recovery_s"] is not None and 0 <= kill["recovery_s"] < 10, p
        assert all(f["recovery_s"] is not None for f in p["faults"] if f["sent_after"]), p
        assert 0 < p["longest_without_ack_s"] < 10, p
    faults = read_faults(run_dir)  # the run's history: what, where, applied or healed, and when
    assert faults is not None and [(f.fault, f.nodes, f.phase, f.outcome) for f in faults] == [
        ("kill bk1-eu", ("bk1-eu",), "applied", "ok"), ("start bk1-eu", ("bk1-eu",), "healed", "ok")]
    assert 0 < faults[0].ts < faults[0].ended_ts <= faults[1].ts and faults[0].offset_s < faults[1].offset_s


def test_sync_region_loss_fails_over_to_us_without_loss(no_pooled_cluster, tmp_path: Path) -> None:
    code, v, _ = run("sync-region-loss", tmp_path)
    assert code == 0, json.dumps(v, indent=2)
    assert v["rpo"] == 0 and v["checks"]["duplicated_in_storage"] == 0
    assert v["waits"][0]["condition"] == "topic_owned_in eu" and v["waits"][0]["held"]
    (p,) = v["rto"]["producers"]
    rec = p["faults"][0]["recovery_s"]
    print(f"eu region lost: first ack after {rec:.1f}s, longest without ack {p['longest_without_ack_s']:.1f}s")
    assert 1 < rec < 50 and 1 < p["longest_without_ack_s"] < 50  # an outage happened, and us ended it


def test_control_no_redundancy_detects_the_lost_messages(no_pooled_cluster, tmp_path: Path) -> None:
    """E=Qw=Qa=1 and the one bookie's disk lost: the control passes only when the loss is proven."""
    code, v, _ = run("control-no-redundancy", tmp_path)
    assert code == 0, json.dumps(v, indent=2)
    assert v["control"] and v["status"] == "pass"
    assert v["checks"]["lost"] > 0 and v["rpo"] == v["checks"]["lost"]
    # what was produced after the wiped ledger was closed is read back: the read-back reached the end
    acked = sum(p["acked"] for p in v["rto"]["producers"])
    assert v["checks"]["lost"] < acked, (v["checks"]["lost"], acked)
    print(f"control-no-redundancy: {v['checks']['lost']} of {acked} acknowledged messages lost")
    assert next(e for e in v["expectations"] if e["name"] == "check lost")["status"] == "pass"
