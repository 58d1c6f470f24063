"""The playbooks on container hosts: ``deploy.yml`` and ``configure.yml`` put ``sync`` onto nine
containers (one per node, each on its own loopback address); placement is proven and messages
go through pulsarlab; a second deploy changes nothing; a changed file restarts only its node; the
rolling-restart and replace-bookie runbooks run under a recorded workload that the verifier then
judges. One deployment for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pytest

from pulsarlab import ops
from pulsarlab.chaos import targets
from pulsarlab.errors import PulsarlabError
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.external import ExternalCluster
from pulsarlab.scenarios.rto import read_sends
from pulsarlab.topology import Role, load
from tests.cluster.ansible_hosts import ContainerHosts, Play, docker
from tests.cluster.test_sync import _drain, _produce, assert_placed_in_both_regions
from tests.topology_files import builtin_at

pytestmark = pytest.mark.cluster
SYSTEMD = frozenset({"bk2-us", "pulsar2-us"})  # hosts with systemd: their nodes run as units
BARE = frozenset({"zk"})  # a host without Java: deploy.yml installs Debian's


@dataclass
class Deployed:
    hosts: ContainerHosts
    render_dir: Path
    state_dir: Path
    deploy: Play

    @property
    def inventory(self) -> Path:
        return self.render_dir / "inventory.yml"

    def cluster(self) -> NodeRuntime:
        return ExternalCluster.open(self.state_dir)


@pytest.fixture(scope="module")
def deployed(docker_host: str, cluster_pool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    cluster_pool.close()  # the containers bind the addresses the local clusters use
    root = tmp_path_factory.mktemp("ansible")
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")
    ref = str(builtin_at("sync", prefix, root)) if prefix else "sync"
    render_dir = root / "rendered"
    ops.render_topology(ref, render_dir, runtime="ansible")
    hosts = ContainerHosts(load(ref), docker_host, f"pulsarlab-ansible-{(prefix or '127.0').replace('.', '-')}", SYSTEMD, BARE)
    hosts.start()
    hosts.connect(render_dir)
    try:
        play = hosts.playbook(render_dir / "inventory.yml", "deploy.yml")
        assert play.rc == 0, play.output[-6000:]
        print(f"deploy.yml: sync on 9 container hosts in {play.seconds:.1f}s")
        yield Deployed(hosts, render_dir, root / "state", play)
    finally:
        hosts.remove()


@pytest.fixture(scope="module")
def configured(deployed: Deployed) -> Deployed:
    play = deployed.hosts.playbook(deployed.inventory, "configure.yml", "-e", f"pulsarlab_state_dir={deployed.state_dir}")
    assert play.rc == 0, play.output[-6000:]
    assert play.recap()["localhost"]["changed"] == 1  # a fresh cluster: tenants, namespaces, policies applied
    print(f"configure.yml in {play.seconds:.1f}s")
    return deployed


def test_the_first_deploy_started_every_node_in_order(deployed: Deployed) -> None:
    recap = deployed.deploy.recap()
    assert set(recap) == {n.name for n in deployed.hosts.topo.nodes}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 and r["changed"] > 0 for r in recap.values())
    out = deployed.deploy.output
    for node in BARE:  # Java came from Debian's package, installed by the play
        assert "openjdk-17-jre-headless" in _installed(deployed, node).split()
    for node in SYSTEMD:
        unit = docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node), "systemctl", "is-active", f"pulsar-{node}")
        assert unit.stdout.strip() == "active", (node, unit.stdout, unit.stderr)
    order = [out.index(f"PLAY [{what}]") for what in (
        "Start ZooKeeper", "Initialise the cluster metadata and write the rack map", "Start the first bookie of each cluster",
        "Start the bookies", "Start the brokers")]
    assert order == sorted(order)


def test_placement_puts_a_copy_in_each_region_and_messages_go_through(configured: Deployed) -> None:
    cluster = configured.cluster()
    assert ops.configure(configured.state_dir, dry_run=True).changes == []
    topic = f"persistent://mytenant/eu/ansible-{uuid.uuid4().hex[:8]}"
    sent = [f"a-{i}".encode() for i in range(200)]
    _produce(cluster, sent, topic)
    assert_placed_in_both_regions(cluster, topic)
    assert set(sent) <= _drain(cluster, topic, set(sent))


def test_second_deploy_and_configure_change_nothing(configured: Deployed) -> None:
    t0 = time.monotonic()
    again = configured.hosts.playbook(configured.inventory, "deploy.yml")
    assert again.rc == 0, again.output[-6000:]
    assert {h: r["changed"] for h, r in again.recap().items()} == {n.name: 0 for n in configured.hosts.topo.nodes}
    conf = configured.hosts.playbook(configured.inventory, "configure.yml", "-e", f"pulsarlab_state_dir={configured.state_dir}")
    assert conf.rc == 0 and conf.recap()["localhost"]["changed"] == 0, conf.output[-3000:]
    print(f"second deploy.yml + configure.yml: nothing changed, {time.monotonic() - t0:.1f}s")


def jvm_pid(deployed: Deployed, node: str) -> str:
    proc = docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node), "pgrep", "-f", f"[-]Dpulsarlab.node={node} ")
    return proc.stdout.strip()


def test_a_changed_file_restarts_only_its_node_and_the_next_run_nothing(configured: Deployed) -> None:
    conf = configured.render_dir / "host_files" / "pulsar2-us" / "conf" / "broker.conf"
    original = conf.read_text()
    pids = {n.name: jvm_pid(configured, n.name) for n in configured.hosts.topo.nodes}
    conf.write_text(original + "# changed by the test\n")
    try:
        play = configured.hosts.playbook(configured.inventory, "deploy.yml")
        assert play.rc == 0, play.output[-6000:]
        assert "PLAY [Restart the brokers whose files changed, one at a time]" in play.output
        assert {h for h, r in play.recap().items() if r["changed"]} == {"pulsar2-us"}
        after = {n.name: jvm_pid(configured, n.name) for n in configured.hosts.topo.nodes}
        assert after["pulsar2-us"] and after["pulsar2-us"] != pids["pulsar2-us"]
        assert {n: p for n, p in after.items() if n != "pulsar2-us"} == {n: p for n, p in pids.items() if n != "pulsar2-us"}
        again = configured.hosts.playbook(configured.inventory, "deploy.yml")
        assert again.rc == 0 and not any(r["changed"] for r in again.recap().values()), again.output[-3000:]
    finally:
        conf.write_text(original)
        configured.hosts.playbook(configured.inventory, "deploy.yml")


def cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pulsarlab.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def longest_without_ack(sends, start_ns: int, end_ns: int) -> float:
    """Seconds of the longest window in [start_ns, end_ns] with no acknowledgement."""
    ok = sends.filter(pc.equal(sends["type"], "ok"))["ts"].to_numpy()
    inside = sorted(t for t in ok.tolist() if start_ns < t < end_ns)
    points = [start_ns, *inside, end_ns]
    return max(b - a for a, b in zip(points, points[1:], strict=False)) / 1e9


def test_runbooks_under_a_workload_lose_nothing(configured: Deployed, tmp_path: Path) -> None:
    """rolling-restart.yml, then replace-bookie.yml for the eu bookie in the topic's ensemble, whose
    machine is lost (a new, empty one in its place), while a workload records every send, ack and
    delivery; the verifier then finds nothing lost or duplicated in storage."""
    topic = f"persistent://mytenant/eu/runbooks-{uuid.uuid4().hex[:8]}"
    run = tmp_path / "run"
    workload = cli("workload", "run", "--state-dir", str(configured.state_dir), "--out", str(run), "--topic", topic,
                   "--duration", "230", "--rate", "500", "--deduplication", "--quiet")
    windows: dict[str, tuple[int, int]] = {}
    try:
        cluster = configured.cluster()
        deadline = time.monotonic() + 90
        while not (ensemble := _ensemble_or_none(cluster, topic)) and time.monotonic() < deadline:
            assert workload.poll() is None, workload.communicate()[0]
            time.sleep(1)
        assert ensemble, f"{topic} has no ledger 90 s after the workload started"
        time.sleep(10)

        t0 = time.time_ns()
        play = configured.hosts.playbook(configured.inventory, "rolling-restart.yml")
        windows["rolling-restart.yml"] = (t0, time.time_ns())
        assert play.rc == 0, play.output[-6000:]
        brokers = [n.name for n in cluster.topo.nodes_of(Role.BROKER)]
        assert {h: r["changed"] > 0 for h, r in play.recap().items()} == dict.fromkeys(brokers, True)

        [victim] = [n for n in targets.ensemble(cluster, topic) if cluster.topo.node(n).region == "eu"]
        t0 = time.time_ns()
        configured.hosts.replace(victim)
        play = configured.hosts.playbook(configured.inventory, "replace-bookie.yml", "-e", f"pulsar_replace_bookie={victim}")
        windows[f"replace-bookie.yml ({victim})"] = (t0, time.time_ns())
        assert play.rc == 0, play.output[-6000:]
        assert play.recap()[victim]["changed"] > 0
        assert "openjdk-17-jre-headless" in _installed(configured, victim).split()  # a new machine: the play installed Java
        out, _ = workload.communicate(timeout=600)
    finally:
        if workload.poll() is None:
            workload.kill()
    assert workload.returncode == 0, out[-3000:]

    (tmp_path / "expect.json").write_text(json.dumps({"allow": ["duplicated_delivery"]}))
    verify = cli("verify", str(run), "--expect", str(tmp_path / "expect.json"), "--json")
    report, _ = verify.communicate(timeout=600)
    verdict = json.loads(report[report.index("{"):])
    failed = {c["name"]: c.get("count") for c in verdict["checks"] if not c["passed"]}
    assert verify.returncode == 0 and verdict["status"] == "pass", (verdict["status"], verdict["reasons"], failed)
    assert not [c for c in verdict["checks"] if c["name"] in ("lost", "duplicated_in_storage") and c.get("count")]

    sends = read_sends(run)
    last_ack = int(pc.max(sends.filter(pc.equal(sends["type"], "ok"))["ts"]).as_py())
    for name, (start, end) in windows.items():
        assert end < last_ack, f"the workload stopped before {name} ended: raise its duration"
        print(f"{name}: {(end - start) / 1e9:.1f}s, longest without an ack {longest_without_ack(sends, start, end):.2f}s")
    gap = verdict["metrics"]["longest_gap_without_ack_s"]["seconds"]
    print(f"verdict {verdict['status']}; longest without an ack over the whole run {gap:.2f}s")

    # the lost bookie's copies were made again: still one per region, and a second run leaves it be
    assert_placed_in_both_regions(cluster, topic)
    again = configured.hosts.playbook(configured.inventory, "replace-bookie.yml", "-e", f"pulsar_replace_bookie={victim}")
    assert again.rc == 0 and not any(r["changed"] for r in again.recap().values()), again.output[-3000:]


def _installed(deployed: Deployed, node: str) -> str:
    return docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node), "dpkg-query", "-W", "-f=${Package}\n").stdout


def _ensemble_or_none(cluster: NodeRuntime, topic: str) -> list[str]:
    try:
        return targets.ensemble(cluster, topic)
    except PulsarlabError:  # not written to yet: the workload is still starting
        return []
