"""The playbooks on container hosts: ``deploy.yml`` and ``configure.yml`` put ``sync`` onto nine
containers (one per node, each on its own loopback address); placement is proven and messages
go through pulsarlab; a second deploy changes nothing. One deployment for the module."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pulsarlab import ops
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.external import ExternalCluster
from pulsarlab.topology import load
from tests.cluster.ansible_hosts import ContainerHosts, Play
from tests.cluster.test_sync import _drain, _produce, assert_placed_in_both_regions
from tests.topology_files import builtin_at

pytestmark = pytest.mark.cluster


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
    hosts = ContainerHosts(load(ref), docker_host, f"pulsarlab-ansible-{(prefix or '127.0').replace('.', '-')}")
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
