"""Role -> the distribution's start command, decided by ``Role.start_command``: the docker
runtime's services, the plain compose files and the Ansible inventory (whose value the playbooks'
background start and systemd unit use) start the same command for a role."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pulsarlab import compose_files
from pulsarlab.ansible.inventory import host_vars
from pulsarlab.runtime.docker import compose
from pulsarlab.topology import Role, load

REPO = Path(__file__).resolve().parents[2]


def test_each_role_starts_its_own_command() -> None:
    assert {r: r.start_command for r in Role} == {Role.ZOOKEEPER: "zookeeper", Role.BOOKIE: "bookie", Role.BROKER: "broker"}


@pytest.mark.parametrize("role", list(Role))
def test_every_runtime_starts_a_node_with_its_roles_command(role: Role, tmp_path: Path) -> None:
    topo = load("sync")
    node = topo.nodes_of(role)[0]
    docker = next(s for s in compose.services(topo, tmp_path, "p", "img:1") if s.name == node.name)
    assert docker.command[-1].startswith(f"exec bin/pulsar {role.start_command} >>")
    plain = compose_files.node_service(topo, node, {})
    assert plain.command[-1].endswith(f"exec bin/pulsar {role.start_command}")
    assert host_vars(topo, node.name)["pulsar_node_command"] == role.start_command


def test_the_playbooks_take_the_command_from_the_inventory() -> None:
    defaults = yaml.safe_load((REPO / "playbooks/roles/pulsar_node/defaults/main.yml").read_text())
    assert "pulsar_node_command" not in defaults  # a default would be a second, silent answer
    launch = (REPO / "playbooks/roles/pulsar_node/tasks/launch.yml").read_text()
    assert "nohup bin/pulsar {{ pulsar_node_command }} " in launch
