"""Built-in scenarios through the CLI: the verdict a user gets (exit code, RPO, RTO) for the blog's
bookie and region losses, run on a running ``sync`` deployment (``--on``, which keeps running with
every fault undone), and a control that must see a loss, on a fresh cluster of its own (its
settings are the scenario's own)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.admin.client import admin_of
from pulsarlab.chaos import netfilter
from pulsarlab.cli import app
from pulsarlab.history.faults import FAULTS_FILE, read_faults
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.scenarios.model import BUILTIN_DIR
from pulsarlab.scenarios.verdict import SCENARIO_FILE
from pulsarlab.topology import Role
from pulsarlab.verify import VERDICT_FILE
from tests.eventually import eventually
from tests.scenario_files import bound, scaled_builtin

runner = CliRunner()


@pytest.fixture
def no_pooled_cluster(cluster_pool) -> None:
    """A scenario starts its own cluster on the topology's addresses: the shared one goes first."""
    cluster_pool.close()


def scenario_ref(name: str, tmp_path: Path, own_cluster: bool) -> str:
    """The built-in with its time bounds scaled (tests/scenario_files.py); for a run on a cluster of
    its own, moved to other loopback addresses when the tests run beside another cluster."""
    data = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")
    if own_cluster and prefix:
        topo = data["topology"] if isinstance(data["topology"], dict) else {"ref": data["topology"]}
        data["topology"] = {**topo, "address_prefix": prefix}
    return str(scaled_builtin(name, tmp_path / "spec", data))


@pytest.fixture
def running_sync(cluster_pool) -> LocalCluster:
    """The session's ``sync`` cluster (the other tests' too): the scenarios run on it with ``--on``."""
    return cluster_pool.get("sync")


def run(name: str, tmp_path: Path, on: LocalCluster | None = None) -> tuple[int, dict, Path]:
    out = tmp_path / "runs"
    where = ["--on", str(on.state_dir)] if on is not None else []
    result = runner.invoke(app, ["scenario", "run", scenario_ref(name, tmp_path, own_cluster=on is None), *where, "--json",
                                 "--out", str(out)])
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


def assert_running_as_before(cluster: LocalCluster) -> None:
    """After a run ``--on`` it: every node up and ready, no packet filter rule of it left, and a new
    eu topic owned by an eu broker again (the isolation policy's primaries)."""
    assert [(n.name, n.alive, n.ready, n.paused) for n in cluster.status()] == [
        (n.name, True, True, False) for n in cluster.topo.nodes]
    assert netfilter.Iptables().listing(netfilter.identity(cluster.state_dir)) == []
    eu = {cluster.topo.address_of(b) for b in cluster.topo.nodes_of(Role.BROKER) if b.region == "eu"}
    admin = admin_of(cluster, "mycluster")
    topic = f"persistent://mytenant/eu/after-{uuid.uuid4().hex[:8]}"

    def owned_in_eu() -> None:
        assert admin.lookup(topic).host in eu

    eventually(owned_in_eu, timeout=60, interval=1, what=f"{topic} owned by an eu broker")


def test_sync_bookie_loss_loses_nothing_and_writes_keep_going(running_sync: LocalCluster, tmp_path: Path) -> None:
    code, v, run_dir = run("sync-bookie-loss", tmp_path, on=running_sync)
    assert code == 0, json.dumps(v, indent=2)
    assert v["status"] == "pass" and v["rpo"] == 0 and v["checks"]["lost"] == 0
    assert [f["fault"] for f in v["faults"]] == ["kill bk1-eu", "start bk1-eu"]
    assert v["waits"][0]["held"]
    producers = v["rto"]["producers"]
    assert len(producers) == 2 and all(p["acked"] > 1000 for p in producers)
    for p in producers:  # the surviving eu bookie and the us copies keep writes going: seconds, not an outage
        kill = p["faults"][0]  # the start may end after the last send: then it has nothing to measure
        assert kill["sent_after"] and kill["recovery_s"] is not None, p
        assert 0 <= kill["recovery_s"] < bound("sync-bookie-loss", "rto_max_s"), p
        assert all(f["recovery_s"] is not None for f in p["faults"] if f["sent_after"]), p
        assert 0 < p["longest_without_ack_s"] < bound("sync-bookie-loss", "outage_max_s"), p
    faults = read_faults(run_dir)  # the run's history: what, where, applied or healed, and when
    assert faults is not None and [(f.fault, f.nodes, f.phase, f.outcome) for f in faults] == [
        ("kill bk1-eu", ("bk1-eu",), "applied", "ok"), ("start bk1-eu", ("bk1-eu",), "healed", "ok")]
    assert 0 < faults[0].ts < faults[0].ended_ts <= faults[1].ts and faults[0].offset_s < faults[1].offset_s
    assert_running_as_before(running_sync)


def test_sync_region_loss_fails_over_to_us_without_loss(running_sync: LocalCluster, tmp_path: Path) -> None:
    code, v, _ = run("sync-region-loss", tmp_path, on=running_sync)
    assert code == 0, json.dumps(v, indent=2)
    assert v["rpo"] == 0 and v["checks"]["duplicated_in_storage"] == 0
    assert v["waits"][0]["condition"] == "topic_owned_in eu" and v["waits"][0]["held"]
    (p,) = v["rto"]["producers"]
    rec = p["faults"][0]["recovery_s"]
    print(f"eu region lost: first ack after {rec:.1f}s, longest without ack {p['longest_without_ack_s']:.1f}s")
    assert rec > 1 and p["longest_without_ack_s"] > 1  # an outage happened (its end: the scenario's bounds)
    assert_running_as_before(running_sync)  # the region's nodes started again, its topics back on eu brokers


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


def test_sync_region_return_repairs_placement_to_a_copy_per_region(no_pooled_cluster, tmp_path: Path) -> None:
    """The region's return, on a fresh sync cluster with the bookies' placement repair on: the ledger
    us wrote alone while eu was down has no copy in eu until the auditor's check and the replication
    workers move one there; the run then ends with every entry in both regions and nothing lost."""
    code, v, run_dir = run("sync-region-return", tmp_path)
    assert code == 0, json.dumps(v, indent=2)
    assert (v["status"], v["rpo"], v["checks"]["lost"]) == ("pass", 0, 0)
    [damage] = [w for w in v["waits"] if w["condition"].split()[0] == "missing_copy_in"]
    [repair] = [w for w in v["waits"] if w["condition"] == "in_every_region"]
    # measured, not assumed: us wrote a ledger with no copy in eu while eu was down, and the repair
    # ended with every entry in both regions
    assert damage["held"] and "no copy in eu" in damage["seen"], damage
    assert repair["held"], repair
    placed = next(e for e in v["expectations"] if e["name"] == "placement")
    assert placed["status"] == "pass" and "each entry in eu, us" in placed["actual"], placed
    print(f"placement repaired {repair['seconds']:.1f}s after the unload: {repair['first_seen']} -> {repair['seen']}")
    assert [f["fault"].split()[0] for f in v["faults"]] == ["kill", "start", "unload"]
