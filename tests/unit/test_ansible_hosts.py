"""Ansible hosts attached by their inventory (``attach --inventory``): what is checked before
anything is written, which runtimes only attach (``up`` and fresh scenario clusters refuse them),
and which faults such a deployment refuses before a run starts (network cuts: this machine's packet
filter does not stand between the hosts). The hosts' node control itself runs in
``tests/cluster/test_ansible.py``, on real hosts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.chaos import actions
from pulsarlab.cli import app
from pulsarlab.errors import ProcessFailedError, StateError, UsageError
from pulsarlab.render import write_topology
from pulsarlab.runtime.hosts import CHECKOUT_PLAYBOOKS, AnsibleHosts, Inventory
from pulsarlab.runtime.state import ClusterState
from pulsarlab.scenarios import batch
from pulsarlab.scenarios.model import load
from pulsarlab.topology import load as load_topology
from tests.topology_files import builtin_at

runner = CliRunner()


def inventory_of(tmp_path: Path, hosts: list[str], topology: str = "smoke", **more) -> Path:
    """An inventory as 'render --runtime ansible' writes one (each node's role and folder), for ``hosts``."""
    roles = {n.name: n.role.value for n in load_topology(topology).nodes}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {h: {
        "ansible_host": "127.0.0.1", "pulsar_role": roles.get(h, "bookie"), "pulsar_node_dir": f"/nodes/{h}", **more}
        for h in hosts}}}))
    return path


def attached(tmp_path: Path, topology: str) -> AnsibleHosts:
    topo = load_topology(topology)
    state = tmp_path / "state"
    state.mkdir()
    write_topology(topo, state)
    hosts = AnsibleHosts(topo, state)
    hosts.record(Inventory.checked(topo, inventory_of(tmp_path, [n.name for n in topo.nodes], topology), None))
    return hosts


def test_an_inventory_with_every_node_is_kept_absolute_with_the_playbooks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    topo = load_topology("smoke")
    inventory_of(tmp_path, [n.name for n in topo.nodes] + ["another-host"])
    got = Inventory.checked(topo, Path("inventory.yml"), None)
    assert got == Inventory(tmp_path / "inventory.yml", CHECKOUT_PLAYBOOKS.resolve())
    again = AnsibleHosts.open(attached(tmp_path, "smoke").state_dir)
    assert again.runtime == "ansible" and again.inventory.path == tmp_path / "inventory.yml"
    assert ClusterState.load(again.state_dir).runtime == "ansible"


@pytest.mark.parametrize(("hosts", "playbooks", "says"), [
    (None, None, "no such file"),
    ("not: [yaml", None, "Ansible cannot read it"),
    (["zk", "bk1"], None, "no host for node(s) bk2, bk3, pulsar1 of 'smoke'"),
    (["zk", "bk1", "bk2", "bk3", "pulsar1"], "elsewhere", "no node.yml there"),
])
def test_an_inventory_that_cannot_reach_every_node_is_refused(tmp_path: Path, hosts, playbooks, says) -> None:
    inventory = inventory_of(tmp_path, hosts) if isinstance(hosts, list) else tmp_path / "inventory.yml"
    if isinstance(hosts, str):
        inventory.write_text(hosts)
    with pytest.raises(UsageError, match=r"--(inventory|playbooks) .*" + says.replace("(", r"\(").replace(")", r"\)")):
        Inventory.checked(load_topology("smoke"), inventory, tmp_path / playbooks if playbooks else None)


def test_an_inventory_other_than_the_deployments_is_refused(tmp_path: Path) -> None:
    inventory = inventory_of(tmp_path, ["zk", "bk1", "bk2", "bk3", "pulsar1"])
    text = inventory.read_text().replace("pulsar_role: broker", "pulsar_role: bookie")
    inventory.write_text(text.replace("      pulsar_node_dir: /nodes/zk\n", ""))
    with pytest.raises(UsageError, match="not the inventory these nodes were deployed from "
                                         r"\(zk has no pulsar_node_dir; pulsar1 has pulsar_role 'bookie', not 'broker'\)"):
        Inventory.checked(load_topology("smoke"), inventory, None)


def test_attach_takes_one_way_to_the_nodes_and_writes_nothing_when_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    both = runner.invoke(app, ["attach", "--topology", "smoke", "--state-dir", str(state),
                               "--inventory", str(inventory_of(tmp_path, ["zk"])), "--compose-project", "p"])
    assert both.exit_code == 2 and "pass one" in both.stderr
    alone = runner.invoke(app, ["attach", "--topology", "smoke", "--state-dir", str(state), "--playbooks", str(tmp_path)])
    assert alone.exit_code == 2 and "--playbooks goes with --inventory" in alone.stderr
    lacking = runner.invoke(app, ["attach", "--topology", "smoke", "--state-dir", str(state),
                                  "--inventory", str(inventory_of(tmp_path, ["zk"]))])
    assert lacking.exit_code == 2 and "no host for node(s) bk1" in lacking.stderr
    assert not state.exists()


@pytest.mark.parametrize("runtime", ["ansible", "compose", "external"])
def test_runtimes_that_only_attach_start_nothing(tmp_path: Path, runtime: str) -> None:
    state = tmp_path / "state"
    up = runner.invoke(app, ["up", "--topology", "smoke", "--runtime", runtime, "--state-dir", str(state)])
    assert up.exit_code == 2, up.output
    assert f"the {runtime} runtime acts on nodes started by something else" in up.stderr
    assert "local or docker" in up.stderr
    scenario = runner.invoke(app, ["scenario", "run", "power-loss", "--runtime", runtime, "--out", str(tmp_path / "runs")])
    assert scenario.exit_code == 2 and f"the {runtime} runtime acts on nodes" in scenario.stderr
    assert not state.exists() and not (tmp_path / "runs").exists()


def test_every_fault_including_network_ones_is_accepted_on_hosts(tmp_path: Path) -> None:
    """Network faults act on each host's own packet filter: nothing of this machine's iptables is
    asked for (whether each host has iptables is what the run's preflight asks the hosts)."""
    hosts = attached(tmp_path, "sync")
    assert hosts.cut_problem() is None
    for fault in ("partition eu us", "isolate-zk bk1-eu", "mute pulsar1-eu", "heal", "kill bk1-eu", "pause pulsar1-us",
                  "region-loss eu", "disk-loss bk2-us"):
        actions.check(hosts, actions.Fault.parse(f"1 {fault}"))
    for name in ("sync-partition", "isolate-owner-from-zk", "sync-bookie-loss", "sync-region-loss"):
        assert batch.unfit(load(name), hosts) is None, name


def test_a_node_action_that_fails_on_its_host_names_the_command_and_what_ansible_said(tmp_path: Path) -> None:
    """A host that cannot be reached (SSH to a closed loopback port): the kill is a ProcessFailedError
    carrying ansible-playbook's command, exit code and output; the check before faults names every
    host that cannot be reached; a start through the CLI exits 1 naming the command."""
    topo = load_topology(str(builtin_at("smoke", "127.97", tmp_path)))  # addresses no other test's cluster uses
    state = tmp_path / "state"
    state.mkdir()
    write_topology(topo, state)
    inventory = inventory_of(tmp_path, [n.name for n in topo.nodes], ansible_port=1, ansible_connection="ssh")
    hosts = AnsibleHosts(topo, state)
    hosts.record(Inventory.checked(topo, inventory, None))
    with pytest.raises(ProcessFailedError) as failed:
        hosts.play("kill", ["bk1"])
    assert failed.value.command[0].endswith("ansible-playbook") and failed.value.returncode != 0
    assert "UNREACHABLE" in failed.value.output and "bk1" in failed.value.output
    with pytest.raises(StateError, match=r"faults cannot act on these hosts: bk1: unreachable \(.*; zk: unreachable"):
        hosts.preflight()
    scenario = runner.invoke(app, ["scenario", "run", "power-loss", "--on", str(state), "--out", str(tmp_path / "runs")])
    assert scenario.exit_code == 1 and "faults cannot act on these hosts: bk1: unreachable" in scenario.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    cli = runner.invoke(app, ["node", "start", "bk1", "--state-dir", str(state)])
    assert cli.exit_code == 1 and "ansible-playbook" in cli.stderr, cli.output
