"""Faults on the real `sync` stretch cluster: partitions cut traffic and heal restores it, targets
resolve to the nodes the admin API names, outages hit exactly their nodes and the cluster comes
back, auto-recovery re-replicates after a bookie loss. Every test leaves all nodes up and no rule.

Faults that start or stop nodes run on the fixture's own deployment object (it records the pids
it starts); the network faults also go through the CLI in a process of their own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pulsar
import pytest
import requests

from pulsarlab import ops, timeouts
from pulsarlab.admin.client import AdminClient, encode_topic
from pulsarlab.chaos import netfilter, recovery, targets
from pulsarlab.chaos.actions import Fault, run_fault
from pulsarlab.errors import StateError
from pulsarlab.identity import state_digest
from pulsarlab.runtime import cgroup
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.security import client
from pulsarlab.topology import Role, load
from tests.eventually import eventually

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def restored(request):
    """After each test, whatever happened: no rule of this deployment left, every node up."""
    yield
    if "sync" in request.fixturenames:
        cluster = request.getfixturevalue("sync")
        netfilter.remove_if_any(cluster.state_dir)
        cluster.up()


def connects(cluster: LocalCluster, node: str, dest: str, port: int, timeout: float = 1.0) -> bool:
    """A TCP connection to ``dest:port`` from a process in ``node``'s own cgroup: what the node's
    own connections meet (they leave from 127.0.0.1 like everyone's; the cgroup tells them apart)."""
    procs = cgroup.hierarchy() / cluster.traffic_cgroup(node) / "cgroup.procs"

    def enter() -> None:
        with open(procs, "w") as fh:
            fh.write("0")

    code = "import socket, sys; s = socket.create_connection((sys.argv[1], int(sys.argv[2])), float(sys.argv[3]))"
    done = subprocess.run([sys.executable, "-c", code, dest, str(port), str(timeout)], preexec_fn=enter,
                          capture_output=True, timeout=30)
    return done.returncode == 0


def addr(cluster: LocalCluster, name: str) -> str:
    return cluster.topo.address_of(cluster.topo.node(name))


def produce(cluster: LocalCluster, topic: str, n: int) -> list[bytes]:
    """``n`` messages acknowledged on ``topic`` (sent synchronously), kept by a durable subscription:
    a topic with none is deleted, ledgers and all, by its broker's inactive-topic sweep once it has
    been idle a minute (Pulsar's default), and a test that waits out a bookie's metadata session
    on a loaded machine can take longer than that."""
    payloads = [f"{i}-{uuid.uuid4().hex}".encode() for i in range(n)]
    c = client(cluster.service_url("mycluster"))
    try:
        c.subscribe(topic, "kept").close()
        p = c.create_producer(topic, batching_enabled=False)
        for m in payloads:
            p.send(m)
    finally:
        c.close()
    return payloads


def read_all(cluster: LocalCluster, topic: str, timeout: float = 60) -> list[bytes]:
    """Every message of the topic from the earliest position (a reader, no subscription)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    c = client(cluster.service_url("mycluster"))
    try:
        r = c.create_reader(topic, pulsar.MessageId.earliest)
        while time.monotonic() < deadline:
            try:
                got.append(r.read_next(timeout_millis=3000).data())
            except pulsar.Timeout:
                break
    finally:
        c.close()
    return got


def cli(*args: str) -> subprocess.CompletedProcess:
    """The CLI of this worktree in a process of its own."""
    return subprocess.run([sys.executable, "-c", "from pulsarlab.cli import main; main()", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_every_node_runs_in_a_cgroup_of_its_own(sync: LocalCluster) -> None:
    for st in sync.status():
        assert cgroup.of_pid(st.pid) == f"pulsarlab/{state_digest(sync.state_dir)}/{st.name}", st.name


def test_partition_cuts_eu_from_us_both_ways_and_heal_restores_it(sync: LocalCluster) -> None:
    eu, us = addr(sync, "pulsar1-eu"), addr(sync, "pulsar1-us")
    web = sync.topo.node("pulsar1-us").port("web")
    ident = netfilter.identity(sync.state_dir)
    assert connects(sync, "pulsar1-eu", us, web) and connects(sync, "pulsar1-us", eu, web), \
        "the regions do not reach each other before the cut"
    # added by another process, which then exits: heal must find the rules from the state directory
    added = cli("chaos", "partition", "eu", "us", "--state-dir", str(sync.state_dir), "--json")
    assert added.returncode == 0, added.stderr
    assert "partitioned eu from us: 40 DROP rules" in added.stdout
    assert not connects(sync, "pulsar1-eu", us, web), "eu still reaches a us broker across the partition"
    assert not connects(sync, "pulsar1-us", eu, web), "us still reaches an eu broker across the partition"
    assert not connects(sync, "bk1-us", addr(sync, "zk"), 2181), "us still reaches ZooKeeper (in eu)"
    assert connects(sync, "pulsar1-eu", addr(sync, "pulsar2-eu"), web), "the partition cut eu from itself"
    # the nodes' own traffic hits the rules: us nodes' ZooKeeper pings, at least

    def dropped_10() -> None:
        assert netfilter.Iptables().dropped(ident) >= 10, "the cut dropped none of the nodes' own packets"

    eventually(dropped_10, timeout=20, interval=1, what="10 of the nodes' own packets dropped")
    assert ops.chaos_action(sync.state_dir, "partition", ["eu", "us"]).endswith(
        f"(0 new), comment '{netfilter.identity(sync.state_dir)} partition eu us'")  # re-running adds nothing
    healed = cli("chaos", "heal", "--state-dir", str(sync.state_dir))
    assert healed.returncode == 0 and "removed 40 DROP rule(s)" in healed.stdout, healed.stderr
    assert connects(sync, "pulsar1-eu", us, web) and connects(sync, "pulsar1-us", eu, web), "heal did not restore traffic"
    assert "removed 0 DROP rule(s)" in ops.chaos_action(sync.state_dir, "heal", [])  # safe to re-run


def test_heal_and_down_leave_other_rules_alone(tmp_path: Path) -> None:
    """A rule that is not this deployment's survives heal and down; ours do not survive down."""
    base = cgroup.hierarchy() / "pulsarlab" / f"test-{uuid.uuid4().hex[:8]}"  # iptables wants cgroups that exist

    def side(n: int) -> list[netfilter.Member]:
        (base / str(n)).mkdir(parents=True, exist_ok=True)
        return [netfilter.Member(f"pulsarlab/{base.name}/{n}", f"127.0.9.{n}")]

    other = netfilter.cut(netfilter.identity(tmp_path / "other"), "partition a b", side(1), side(2))
    stopped = LocalCluster(load("smoke"), tmp_path / "smoke")  # no node running: down only cleans up
    ours = netfilter.cut(netfilter.identity(stopped.state_dir), "partition a b", side(3), side(4))
    ipt = netfilter.Iptables()
    try:
        assert ipt.add(other + ours) == 4
        stopped.down()
        left = set(ipt.listing())
        assert set(other) <= left and not set(ours) & left
    finally:
        ipt.remove(netfilter.identity(tmp_path / "other"))
        ipt.remove(netfilter.identity(stopped.state_dir))
        for d in (*(d for d in base.iterdir() if d.is_dir()), base):
            d.rmdir()


def test_isolate_zk_cuts_only_that_node_from_zookeeper(sync: LocalCluster) -> None:
    done = ops.chaos_action(sync.state_dir, "isolate-zk", ["pulsar2-us"])
    assert "isolated pulsar2-us from ZooKeeper: 2 DROP rule(s)" in done
    zk = addr(sync, "zk")
    assert not connects(sync, "pulsar2-us", zk, 2181)
    assert connects(sync, "pulsar1-us", zk, 2181)
    assert connects(sync, "pulsar2-us", addr(sync, "bk1-us"), 3181)
    # the broker's own ZooKeeper session is what is cut: its pings are dropped within seconds
    ident = netfilter.identity(sync.state_dir)

    def dropped_any() -> None:
        assert netfilter.Iptables().dropped(ident) > 0, "pulsar2-us sent ZooKeeper nothing the cut dropped"

    eventually(dropped_any, timeout=20, interval=1, what="a ZooKeeper ping of pulsar2-us dropped")


def test_owner_and_ensemble_targets_name_what_the_admin_api_says(sync: LocalCluster) -> None:
    topic = f"persistent://mytenant/us/targets-{uuid.uuid4().hex[:6]}"
    produce(sync, topic, 5)
    admin = AdminClient(sync.admin_url("mycluster"))
    owner_host = admin.lookup(topic).host
    [owner] = targets.resolve_all(sync, [f"owner:{topic}"])
    assert addr(sync, owner) == owner_host and sync.topo.node(owner).role == Role.BROKER
    stats = requests.get(f"{sync.admin_url('mycluster')}/admin/v2/{encode_topic(topic)}/internalStats",
                         params={"metadata": "true"}, timeout=10).json()
    newest = max(stats["ledgers"], key=lambda led: led["ledgerId"])
    [bookie] = targets.resolve_all(sync, [f"ensemble:{topic}"])
    assert sync.topo.node(bookie).role == Role.BOOKIE
    assert f"{addr(sync, bookie)}:3181" in newest["metadata"], (bookie, newest["metadata"])
    assert targets.resolve_all(sync, ["region:us"]) == ["bk1-us", "bk2-us", "pulsar1-us", "pulsar2-us"]


def test_region_loss_kills_exactly_that_regions_nodes(sync: LocalCluster) -> None:
    done = run_fault(sync, Fault(0, "region-loss", ("us",))).what
    assert done == "region us lost: killed bk1-us, bk2-us, pulsar1-us, pulsar2-us at once"
    down = {n.name for n in sync.topo.nodes if not sync.alive(n.name)}
    assert down == {"bk1-us", "bk2-us", "pulsar1-us", "pulsar2-us"}


def test_auto_recovery_re_replicates_a_lost_bookies_ledgers_within_the_region(sync: LocalCluster) -> None:
    """The harder case: the lost bookie is the only one of its region that runs auto-recovery, so a
    replication worker of the other region must make the new copy."""
    topic = f"persistent://mytenant/eu/recovery-{uuid.uuid4().hex[:6]}"
    eu = [b for b in sync.topo.nodes_of(Role.BOOKIE) if b.region == "eu"]
    assert [b.name for b in eu if sync.topo.runs_auto_recovery(b)] == ["bk1-eu"]
    lost, other = "bk1-eu", "bk2-eu"
    run_fault(sync, Fault(0, "stop", (other,)))  # the topic's ledger gets its eu copy on the lost bookie
    produce(sync, topic, 50)
    run_fault(sync, Fault(0, "start", (other,)))
    sync.wait_writable_bookies("mycluster")
    assert lost in targets.ensemble(sync, topic)
    run_fault(sync, Fault(0, "kill", (lost,)))
    # the auditor marks the lost bookie's ledgers once its registration is gone (its metadata
    # session, zkTimeout: 30 s); a closed ledger is re-replicated at once, an open one only after a
    # grace period
    AdminClient(sync.admin_url("mycluster")).unload_topic(topic)
    t0 = time.monotonic()
    try:
        report = recovery.wait_replicated(sync, topic, timeout=120 * timeouts.scale())
        print(f"re-replicated {len(report.topics[0].ledgers)} ledger(s) in {time.monotonic() - t0:.1f}s after the kill")
    except StateError as exc:
        pytest.fail(f"{exc}\n{recovery_log_lines(sync)}")
    lost_id, other_id = f"{addr(sync, lost)}:3181", f"{addr(sync, other)}:3181"
    ensembles = [bs for led in report.topics[0].ledgers for bs in led.ensembles.values()]
    assert ensembles and all(lost_id not in bs for bs in ensembles), ensembles
    assert any(other_id in bs for bs in ensembles), f"the copies did not move to {other}: {ensembles}"
    assert all(led.regions == ["eu", "us"] for led in report.topics[0].ledgers)
    assert all(led.ensembles_from.startswith("metadata store") for led in report.topics[0].ledgers)


def recovery_log_lines(cluster: LocalCluster, last: int = 12) -> str:
    """What the bookies' auditor and replication workers logged, for a failure message."""
    words = ("auditor", "replicationworker", "underreplicat", "notenoughbookies", "rereplicat", "fragment")
    out = []
    for b in cluster.topo.nodes_of(Role.BOOKIE):
        lines = [ln for ln in cluster.log_file(b.name).read_text(errors="replace").splitlines()
                 if any(w in ln.lower() for w in words)]
        out.append(f"--- {b.name} ---\n" + "\n".join(ln[:300] for ln in lines[-last:]))
    return "\n".join(out)


def test_disk_loss_brings_a_bookie_back_empty_under_the_same_id(sync: LocalCluster) -> None:
    data = sync.dirs(sync.topo.node("bk2-us")).data
    marker = data / "ledgers" / "pulsarlab-marker"
    marker.write_text("here before the disk was lost")
    cookie = data / "journal" / "current" / "VERSION"
    written_before = (cookie.stat().st_ino, cookie.stat().st_mtime_ns)
    done = run_fault(sync, Fault(0, "disk-loss", ("bk2-us",))).what
    assert done == "disk lost: bk2-us killed, data and cookie removed, started again empty"
    assert not marker.exists()
    assert (cookie.stat().st_ino, cookie.stat().st_mtime_ns) != written_before, "the bookie kept its old cookie file"
    rw = requests.get(f"http://{addr(sync, 'bk1-us')}:8000/api/v1/bookie/list_bookies?type=rw&print_hostnames=false",
                      timeout=10).json()
    assert f"{addr(sync, 'bk2-us')}:3181" in rw, rw


def test_power_loss_brings_every_node_back_with_acknowledged_messages_readable(sync: LocalCluster) -> None:
    topic = f"persistent://mytenant/eu/power-{uuid.uuid4().hex[:6]}"
    sent = produce(sync, topic, 200)
    done = run_fault(sync, Fault(0, "power-loss")).what
    print(done)
    assert done.startswith("power loss: killed all 9 nodes at once, started 9 again") and "journal fsync on" in done
    assert all(sync.alive(n.name) for n in sync.topo.nodes)
    got = read_all(sync, topic)
    assert sorted(got) == sorted(sent), f"{len(set(sent) - set(got))} acknowledged messages missing after power loss"
