"""The operator runbooks on container hosts: ``sync`` deployed onto nine of ten containers, then
``add-bookie.yml`` brings in the tenth (a bookie), ``upgrade.yml`` moves every node onto another
distribution folder and back, and ``region-failover.yml`` refuses to stop the ZooKeeper's region
and drills the other one under a workload. One deployment for the module (its own: the lead may
fold it into test_ansible.py's)."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml

from pulsarlab import ops
from pulsarlab.topology import Topology, load
from pulsarlab.workload.run import WorkloadConfig
from tests.cluster.ansible_hosts import ContainerHosts, Play, docker
from tests.topology_files import builtin_at

pytestmark = pytest.mark.cluster

NEW_BOOKIE = {"name": "bk3-eu", "role": "bookie", "cluster": "mycluster", "region": "eu", "rack": "eu/1"}


@dataclass
class Deployed:
    hosts: ContainerHosts  # all ten containers
    small: Topology  # what deploy.yml put on nine of them
    big_ref: str  # the same with NEW_BOOKIE appended
    render_dir: Path
    state_dir: Path

    @property
    def inventory(self) -> Path:
        return self.render_dir / "inventory.yml"

    def play(self, book: str, *extra: str) -> Play:
        play = self.hosts.playbook(self.inventory, book, *extra)
        print(f"{book} {' '.join(extra)}: rc {play.rc} in {play.seconds:.1f}s")
        return play

    def pids(self) -> dict[str, str]:
        """Each node's JVM pid in its container ('' when none runs)."""
        out = {}
        for n in self.hosts.topo.nodes:
            proc = docker(self.hosts.docker_host, "exec", self.hosts.name(n.name), "pgrep", "-f", f"[-]Dpulsarlab.node={n.name} ")
            out[n.name] = proc.stdout.strip()
        return out

    def homes(self) -> dict[str, str]:
        """The distribution folder each node's JVM runs from (its class path's lib/)."""
        out = {}
        for n in self.hosts.topo.nodes:
            proc = docker(self.hosts.docker_host, "exec", self.hosts.name(n.name), "bash", "-c",
                          f"tr '\\0' ' ' < /proc/$(pgrep -f -- '[-]Dpulsarlab.node={n.name} ')/cmdline")
            found = set(re.findall(r"(/opt/pulsar/[^/:]+)/lib/", proc.stdout))
            out[n.name] = found.pop() if len(found) == 1 else str(sorted(found))
        return out

    def bookie_url(self, name: str) -> str:
        topo = load(self.big_ref)
        node = topo.node(name)
        return f"http://{topo.address_of(node)}:{node.port('http')}"

    def broker_url(self, name: str) -> str:
        topo = load(self.big_ref)
        node = topo.node(name)
        return f"http://{topo.address_of(node)}:{node.port('web')}"

    def bookie_id(self, name: str) -> str:
        topo = load(self.big_ref)
        node = topo.node(name)
        return f"{topo.address_of(node)}:{node.port('bookie')}"


@pytest.fixture(scope="module")
def deployed(docker_host: str, cluster_pool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    cluster_pool.close()  # the containers bind the addresses the local clusters use
    root = tmp_path_factory.mktemp("runbooks")
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX", "127.0")
    small_ref = builtin_at("sync", prefix, root)
    data = yaml.safe_load(small_ref.read_text())
    big_ref = root / f"sync-{prefix}-bk3.yaml"  # appended last: every other node keeps its address
    big_ref.write_text(yaml.safe_dump({**data, "nodes": [*data["nodes"], NEW_BOOKIE]}))
    render_dir = root / "rendered"
    ops.render_topology(str(small_ref), render_dir, runtime="ansible")
    hosts = ContainerHosts(load(str(big_ref)), docker_host, f"pulsarlab-ansible-{prefix.replace('.', '-')}")
    hosts.start()
    hosts.connect(render_dir)
    try:
        d = Deployed(hosts, load(str(small_ref)), str(big_ref), render_dir, root / "state")
        play = d.play("deploy.yml")
        assert play.rc == 0, play.output[-6000:]
        conf = d.play("configure.yml", "-e", f"pulsarlab_state_dir={d.state_dir}")
        assert conf.rc == 0, conf.output[-6000:]
        yield d
    finally:
        hosts.remove()


def test_add_bookie_registers_it_writable_in_its_rack_and_restarts_nothing_else(deployed: Deployed) -> None:
    before = deployed.pids()
    assert before["bk3-eu"] == "" and all(pid for name, pid in before.items() if name != "bk3-eu")
    ops.render_topology(deployed.big_ref, deployed.render_dir, runtime="ansible")  # the operator's re-render
    play = deployed.play("add-bookie.yml", "-e", "pulsar_new_bookie=bk3-eu")
    assert play.rc == 0, play.output[-6000:]
    recap = play.recap()
    assert set(recap) == {"localhost", "zk", "bk3-eu"}, recap  # nothing else is even visited
    assert recap["bk3-eu"]["changed"] > 0 and recap["zk"]["changed"] == 1  # the rack map written once
    out = play.output
    assert out.index("PLAY [Write the rack map with the new bookie in it]") < out.index(
        "PLAY [Start the new bookie and check the cluster lists it writable]")

    after = deployed.pids()
    assert after["bk3-eu"], "the new bookie does not run"
    assert {n: p for n, p in after.items() if n != "bk3-eu"} == {n: p for n, p in before.items() if n != "bk3-eu"}
    writable = requests.get(f"{deployed.bookie_url('bk1-eu')}/api/v1/bookie/list_bookies",
                            params={"type": "rw", "print_hostnames": "false"}, timeout=10).json()
    assert deployed.bookie_id("bk3-eu") in writable, writable
    racks = requests.get(f"{deployed.broker_url('pulsar1-us')}/admin/v2/bookies/racks-info", timeout=10).json()
    placed = {bid: info["rack"] for group in racks.values() for bid, info in group.items()}
    assert placed.get(deployed.bookie_id("bk3-eu")) == "eu/1", racks

    again = deployed.play("add-bookie.yml", "-e", "pulsar_new_bookie=bk3-eu")
    assert again.rc == 0, again.output[-6000:]
    assert {h: r["changed"] for h, r in again.recap().items()} == {"localhost": 0, "zk": 0, "bk3-eu": 0}
    assert deployed.pids() == after


def test_add_bookie_refuses_a_name_not_in_the_inventory(deployed: Deployed) -> None:
    play = deployed.play("add-bookie.yml", "-e", "pulsar_new_bookie=bk9-eu")
    assert play.rc != 0
    assert "pulsar_new_bookie must name bookies of the inventory" in play.output
    assert set(play.recap()) == {"localhost"}


def test_upgrade_moves_every_node_one_at_a_time_and_rollback_moves_it_back(deployed: Deployed, tmp_path: Path) -> None:
    """The same 4.0.8 build unpacked under another folder name stands in for a new version (one
    version is at hand): every JVM must end up running from the new folder, each restarted once."""
    home, artifact = _group_vars(deployed)["pulsar_home"], _group_vars(deployed)["pulsar_artifact"]
    new_home = f"{home}-next"
    tarball = _renamed_distribution(Path(artifact), Path(new_home).name, tmp_path)
    upgrade = ("-e", f"pulsar_home={new_home}", "-e", f"pulsar_artifact={tarball}")
    before = deployed.pids()
    play = deployed.play("upgrade.yml", *upgrade)
    assert play.rc == 0, play.output[-8000:]
    out = play.output
    order = [out.index(f"PLAY [{what}]") for what in (
        "Unpack the new distribution on every host (no restart)", "Upgrade ZooKeeper, one node at a time",
        "Upgrade the bookies, one at a time, each followed by no under-replicated ledger", "Upgrade the brokers, one at a time")]
    assert order == sorted(order)
    upgraded = deployed.pids()
    assert all(upgraded[n] and upgraded[n] != before[n] for n in before), (before, upgraded)
    assert deployed.homes() == dict.fromkeys(before, new_home)

    again = deployed.play("upgrade.yml", *upgrade)  # everything on the version: nothing restarts
    assert again.rc == 0, again.output[-6000:]
    assert {h: r["changed"] for h, r in again.recap().items()} == {n.name: 0 for n in deployed.hosts.topo.nodes}
    assert deployed.pids() == upgraded

    back = deployed.play("upgrade.yml")  # rollback: the rendered (old) distribution again
    assert back.rc == 0, back.output[-8000:]
    assert deployed.homes() == dict.fromkeys(before, home)
    assert all(deployed.pids()[n] != upgraded[n] for n in before)


def _group_vars(deployed: Deployed) -> dict:
    return yaml.safe_load((deployed.render_dir / "group_vars" / "all.yml").read_text())


def _renamed_distribution(tarball: Path, top: str, folder: Path) -> Path:
    """``tarball`` repacked (uncompressed) with its top folder named ``top``."""
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(folder)], check=True, timeout=300)
    (src,) = [p for p in folder.iterdir() if p.is_dir()]
    src.rename(folder / top)
    out = folder / f"{top}.tar"
    subprocess.run(["tar", "-cf", str(out), "-C", str(folder), top], check=True, timeout=300)
    return out


def test_region_failover_refuses_to_stop_the_zookeeper_region(deployed: Deployed) -> None:
    before = deployed.pids()
    play = deployed.play("region-failover.yml", "-e", "pulsar_failover_region=eu", "-e", "pulsar_failover_confirm=false")
    assert play.rc != 0
    assert "region eu holds ZooKeeper zk: stopping it leaves 0 of 1 ZooKeeper nodes, no quorum" in " ".join(play.output.split())
    assert set(play.recap()) == {"localhost"}
    assert deployed.pids() == before


def test_region_failover_drill_of_us_loses_no_acknowledged_message(deployed: Deployed, tmp_path: Path) -> None:
    """The drill of us under a workload on a topic of mytenant/us (its owner moves to eu and back),
    then the verifier over the history: nothing acknowledged lost, and the outage the clients saw."""
    before = deployed.pids()
    cfg = WorkloadConfig(f"persistent://mytenant/us/drill-{uuid.uuid4().hex[:8]}", producers=1, consumers=1, rate=100,
                         duration=90)
    run_dir, box = tmp_path / "run", {}
    worker = threading.Thread(target=lambda: box.update(result=ops.workload_run(deployed.state_dir, cfg, run_dir)))
    worker.start()
    try:
        time.sleep(10)  # the workload under way
        play = deployed.play("region-failover.yml", "-e", "pulsar_failover_region=us", "-e", "pulsar_failover_confirm=false",
                             "-e", "pulsar_failover_hold_seconds=10")
    finally:
        worker.join(timeout=600)
    assert play.rc == 0, play.output[-8000:]
    recap = play.recap()
    us = {"bk1-us", "bk2-us", "pulsar1-us", "pulsar2-us"}
    assert us <= set(recap) and not ({"pulsar1-eu", "pulsar2-eu", "bk2-eu", "zk"} & set(recap))
    after = deployed.pids()
    assert all(after[n] and after[n] != before[n] for n in us), (before, after)  # stopped, then running again
    assert {n: after[n] for n in after if n not in us} == {n: before[n] for n in before if n not in us}
    # the lookups answered from eu brokers (the play checks it; here: they ran for both namespaces)
    assert "mytenant/us (cluster mycluster" in play.output and "mytenant/eu (cluster mycluster" in play.output
    writable = requests.get(f"{deployed.bookie_url('bk1-eu')}/api/v1/bookie/list_bookies",
                            params={"type": "rw", "print_hostnames": "false"}, timeout=10).json()
    assert {deployed.bookie_id(b) for b in ("bk1-us", "bk2-us")} <= set(writable)
    under = requests.get(f"{deployed.bookie_url('bk1-eu')}/api/v1/autorecovery/list_under_replicated_ledger", timeout=10)
    assert (under.status_code, under.text) == (404, "No under replicated ledgers found")

    assert "result" in box, "the workload did not finish"
    assert box["result"].counters.acked > 1000
    verdict = ops.verify_history([run_dir])
    assert verdict.status == "pass", (verdict.reasons, verdict.counts())
    print(f"drill of us under a workload: {box['result'].counters.acked} acknowledged, none lost; "
          f"longest gap without an acknowledgement {verdict.metrics.get('longest_gap_without_ack_s')} s")
